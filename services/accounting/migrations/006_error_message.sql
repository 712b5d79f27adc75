-- What the provider said of a failed attempt (usage_events.status 'error'):
-- the HTTP status and its own message, redacted by the gateway and cut to
-- 500 bytes, shown beside error_class on the dashboard's session page and
-- in `herald insights`. Rows stored before this migration read ''.
--
-- ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS: a second process
-- migrating at once finds the column already there, which Migrate takes as
-- this statement done (columnExists).
ALTER TABLE usage_events ADD COLUMN error_message String DEFAULT '' AFTER error_class;
