-- Roll-ups the cost queries and the dashboard read instead of raw rows. An
-- hour is the grain (a day is 24 of them) so a --since window is exact: whole
-- hours come from here, the partial first hour from usage_events. Hours are
-- computed from the Unix time so they do not depend on the server's zone.
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_hourly
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (tenant, hour, provider, model, purpose)
AS SELECT
    toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    tenant, provider, model, purpose,
    count() AS calls,
    countIf(status != 'ok') AS errors,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cache_read_tokens) AS cache_read_tokens,
    sum(cache_write_tokens) AS cache_write_tokens,
    sum(reasoning_tokens) AS reasoning_tokens,
    sum(cost_nano_usd) AS cost_nano_usd,
    sum(toUInt64(latency_ms)) AS latency_ms
FROM usage_events
GROUP BY hour, tenant, provider, model, purpose;

-- Per session: ordered tenant and time first like every dashboard query
-- ("top sessions of the last day"); a single session is found through
-- session_spans below.
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_by_session
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (tenant, hour, session_id, provider, model, purpose)
AS SELECT
    toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    tenant, session_id, provider, model, purpose,
    count() AS calls,
    countIf(status != 'ok') AS errors,
    sum(input_tokens) AS input_tokens,
    sum(output_tokens) AS output_tokens,
    sum(cache_read_tokens) AS cache_read_tokens,
    sum(cache_write_tokens) AS cache_write_tokens,
    sum(reasoning_tokens) AS reasoning_tokens,
    sum(cost_nano_usd) AS cost_nano_usd,
    sum(toUInt64(latency_ms)) AS latency_ms
FROM usage_events
GROUP BY hour, tenant, session_id, provider, model, purpose;

-- Where each session's rows are: its tenant(s) and hours, ordered by session
-- id so that `herald cost --session ID` and the session page find them with
-- a primary-key lookup and then read only that slice.
CREATE MATERIALIZED VIEW IF NOT EXISTS session_spans
ENGINE = SummingMergeTree()
ORDER BY (session_id, tenant, hour)
AS SELECT
    session_id, tenant,
    toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    count() AS calls
FROM usage_events
GROUP BY session_id, tenant, hour;
