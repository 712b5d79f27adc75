-- One row per provider attempt and one per tool execution. Rows are ordered
-- tenant and time first, which is how every dashboard query filters them.
-- ReplacingMergeTree keyed on event_id (inside the sort key) lets a raw query
-- with FINAL collapse an event that was ever stored twice; the sink itself
-- never stores an event twice (see 002). Granules of 1024 rows (not 8192):
-- with tenant first, a time-range read without a tenant touches about one
-- granule per tenant, so smaller granules keep "the last partial hour" (read
-- raw by --since windows) a small read.
CREATE TABLE IF NOT EXISTS usage_events (
    event_id           String,
    ts                 DateTime,
    tenant             String,
    session_id         String,
    parent_session_id  String,
    task_id            String,
    purpose            String,
    provider           String,
    model              String,
    api_mode           String,
    input_tokens       UInt64,
    output_tokens      UInt64,
    cache_read_tokens  UInt64,
    cache_write_tokens UInt64,
    reasoning_tokens   UInt64,
    cost_nano_usd      UInt64,
    price_source       String,
    latency_ms         UInt32,
    status             String,
    error_class        String,
    attempt            UInt16,
    is_fallback        UInt8
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, ts, event_id)
SETTINGS index_granularity = 1024;

CREATE TABLE IF NOT EXISTS tool_events (
    event_id     String,
    ts           DateTime,
    tenant       String,
    session_id   String,
    task_id      String,
    call_id      String,
    tool         String,
    runner       String,
    duration_ms  UInt32,
    status       String,
    output_bytes UInt64
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, ts, event_id)
SETTINGS index_granularity = 1024;
