// Package accounting is Herald's usage and cost ledger. It owns:
//
//   - the ClickHouse schema (versioned migrations under migrations/, applied
//     at Start and by Migrate), including the roll-up materialized views;
//   - the sink: the durable consumers "accounting-usage" (USAGE stream) and
//     "accounting-tools" (TOOL_EVENTS stream), which batch events into
//     usage_events and tool_events and ack them only once ClickHouse holds
//     them, storing each event id at most once;
//   - the cost queries behind `herald cost` (QueryCost) and the dashboard;
//   - a private ClickHouse server for `herald up`, `herald demo` and tests
//     (StartLocalClickHouse, EnsureTestClickHouse).
//
// It must not touch other services' streams or subjects: it only reads the
// USAGE and TOOL_EVENTS streams and writes dead letters through pkg/bus. It
// is the only Herald module that imports clickhouse-go.
package accounting
