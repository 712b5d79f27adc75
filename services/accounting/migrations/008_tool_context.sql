-- What each tool result cost in context: one row per (model call attempt,
-- tool result its prompt carried), from UsageEvent.carried. event_id is the
-- usage event's (usage_events.event_id), call_id the tool call's
-- (tool_events.call_id of the same session). tokens is the result's size in
-- that prompt (estimated = 1: characters/4, not the model's tokenizer);
-- input/cache_read/cache_write_tokens split it as the provider's cache did,
-- and cost_nano_usd is that part of the call's cost (docs/COSTS.md); unpriced
-- = 1: the model had no price, so that cost is unknown, not 0.
--
-- The sink stores these rows before their usage event, so an event found
-- stored has its rows; an event whose rows are stored but not itself (the
-- sink died between the two) is stored again without them: the sink looks
-- its id up here first, by tenant and time (the sort key).
CREATE TABLE IF NOT EXISTS tool_context_costs (
    event_id           String,
    ts                 DateTime,
    tenant             String,
    session_id         String,
    parent_session_id  String,
    call_id            String,
    tool               String,
    model              String,
    tokens             UInt64,
    estimated          UInt8,
    input_tokens       UInt64,
    cache_read_tokens  UInt64,
    cache_write_tokens UInt64,
    cost_nano_usd      UInt64,
    unpriced           UInt8
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (tenant, ts, event_id, call_id)
SETTINGS index_granularity = 1024
