-- Price corrections `herald cost reprice` wrote: a usage row priced again
-- with the prices in force at its time (a price added for an unpriced
-- model, a corrected or dated price). History is never rewritten: the
-- usage row keeps what it was billed when it was stored, and each
-- correction is a row of its own saying which row, from what cost and
-- price_source to what, when and why. A row corrected again gets the next
-- seq, its cost_before the previous correction's cost_after, so a row's
-- figure is its latest correction's cost_after (or its own cost when it
-- has none), and every correction is kept for audit.
CREATE TABLE IF NOT EXISTS usage_corrections (
    event_id             String,
    seq                  UInt32,
    ts                   DateTime,
    tenant               String,
    session_id           String,
    parent_session_id    String,
    provider             String,
    model                String,
    purpose              String,
    cost_before_nano_usd UInt64,
    cost_after_nano_usd  UInt64,
    price_source_before  String,
    price_source_after   String,
    corrected_at         DateTime,
    reason               String
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, ts, event_id, seq);

-- The roll-ups every cost view reads get each correction's difference as
-- a row of no calls and no tokens in the corrected row's hour, so `herald
-- cost`, exports, the dashboard and Grafana show the corrected figure. A
-- lower price makes the difference negative: it is stored as UInt64 modulo
-- 2^64 (toUInt64 of the Int64 difference), which sum() of UInt64 adds back
-- exactly, since every total it belongs to is the sum of rows' costs and
-- so never below zero.
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_corrections_hourly TO usage_hourly
AS SELECT
    toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    tenant, provider, model, purpose,
    toUInt64(0) AS calls,
    toUInt64(0) AS errors,
    toUInt64(0) AS input_tokens,
    toUInt64(0) AS output_tokens,
    toUInt64(0) AS cache_read_tokens,
    toUInt64(0) AS cache_write_tokens,
    toUInt64(0) AS reasoning_tokens,
    toUInt64(toInt64(cost_after_nano_usd) - toInt64(cost_before_nano_usd)) AS cost_nano_usd,
    toUInt64(0) AS latency_ms
FROM usage_corrections;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_corrections_by_session TO usage_by_session
AS SELECT
    toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour,
    tenant, session_id, provider, model, purpose,
    toUInt64(0) AS calls,
    toUInt64(0) AS errors,
    toUInt64(0) AS input_tokens,
    toUInt64(0) AS output_tokens,
    toUInt64(0) AS cache_read_tokens,
    toUInt64(0) AS cache_write_tokens,
    toUInt64(0) AS reasoning_tokens,
    toUInt64(toInt64(cost_after_nano_usd) - toInt64(cost_before_nano_usd)) AS cost_nano_usd,
    toUInt64(0) AS latency_ms
FROM usage_corrections;
