-- Usage events whose model had no price (price_source 'unknown') and that
-- used tokens: their cost_nano_usd is 0 because the price is missing, not
-- because the call was free. Cost queries count them per group so a total
-- with unpriced calls in it reads as a lower bound. The rows keep tokens,
-- model and provider in usage_events, so they can be priced later.
--
-- Counted with uniqExact(event_id): an event stored twice here (the
-- backfill below running while the view already fills the table, or this
-- migration re-run) still counts once.
CREATE TABLE IF NOT EXISTS usage_unpriced (
    event_id   String,
    ts         DateTime,
    hour       DateTime,
    tenant     String,
    session_id String,
    provider   String,
    model      String,
    purpose    String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (tenant, hour, event_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_unpriced_fill TO usage_unpriced
AS SELECT event_id, ts, toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    tenant, session_id, provider, model, purpose
FROM usage_events
WHERE price_source = 'unknown' AND input_tokens + output_tokens + cache_read_tokens + cache_write_tokens > 0;

INSERT INTO usage_unpriced (event_id, ts, hour, tenant, session_id, provider, model, purpose)
SELECT event_id, ts, toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    tenant, session_id, provider, model, purpose
FROM usage_events
WHERE price_source = 'unknown' AND input_tokens + output_tokens + cache_read_tokens + cache_write_tokens > 0;
