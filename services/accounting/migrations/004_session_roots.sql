-- Which root session each delegated child session belongs to, so a parent's
-- cost includes its subagents' wherever a session's cost is shown (`herald
-- cost --session`, `--by session`, the dashboard's session page and top
-- sessions). A child's usage rows carry its parent in parent_session_id, and
-- delegation is one level deep, so the parent is the root.
--
-- Membership only: a pair stored twice changes nothing (queries read it
-- with GROUP BY), which is what lets the backfill below run safely while the
-- view already fills the table, and again if this migration is re-run.
-- Old rows keep working: the backfill maps every child that already has
-- usage rows; rows without parent_session_id are their own root.
CREATE TABLE IF NOT EXISTS session_roots (
    root_session_id String,
    session_id      String
) ENGINE = ReplacingMergeTree()
ORDER BY (root_session_id, session_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS session_roots_fill TO session_roots
AS SELECT parent_session_id AS root_session_id, session_id
FROM usage_events
WHERE parent_session_id != ''
GROUP BY root_session_id, session_id;

INSERT INTO session_roots (root_session_id, session_id)
SELECT parent_session_id AS root_session_id, session_id
FROM usage_events
WHERE parent_session_id != ''
GROUP BY root_session_id, session_id;
