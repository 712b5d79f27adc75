-- Every stored event id, ordered by id so the sink can ask "which of these
-- ids are already stored?" with a primary-key lookup before it inserts. The
-- view is filled by the same INSERT that stores the event, so an id is
-- visible here exactly when its row is.
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_event_ids
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY event_id
AS SELECT event_id, ts FROM usage_events;

CREATE MATERIALIZED VIEW IF NOT EXISTS tool_event_ids
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY event_id
AS SELECT event_id, ts FROM tool_events;
