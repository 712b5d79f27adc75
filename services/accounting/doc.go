// Package accounting is Herald's usage and cost ledger. It owns:
//
//   - the ClickHouse schema (versioned migrations under migrations/, applied
//     at Start and by Migrate), including the roll-up materialized views;
//   - the sink: the durable consumers "accounting-usage" (USAGE stream) and
//     "accounting-tools" (TOOL_EVENTS stream), which batch events into
//     usage_events and tool_events and ack them only once ClickHouse holds
//     them, storing each event id at most once;
//   - the cost queries behind `herald cost` (QueryCost) and the dashboard
//     (NewDashboard, Service.Handler);
//   - a private ClickHouse server for `herald up`, `herald demo` and tests
//     (StartLocalClickHouse, EnsureTestClickHouse);
//   - the JetStream KV bucket herald_accounting (insert leases).
//
// It must not touch other services' streams or subjects: it only reads the
// USAGE and TOOL_EVENTS streams and writes dead letters through pkg/bus. It
// is the only Herald module that imports clickhouse-go.
//
// # Counting every event once
//
// Queries read SummingMergeTree roll-ups filled by materialized views, and a
// view adds up every row inserted into its source, also a row inserted twice
// (ReplacingMergeTree collapses duplicates only in the raw table, only at
// merge time, and 18.16 has no insert deduplication for non-replicated
// tables). FINAL, argMax or uniqExact over raw rows would make raw queries
// exact but cannot repair a roll-up, and are far slower. So duplicates are
// kept out at the door instead: under an insert lease (one sink at a time per
// stream, across processes) the sink asks usage_event_ids which of the
// batch's ids ClickHouse already holds, inserts only the others, and acks the
// messages only after that. A sink killed between insert and ack leaves its
// messages to be redelivered; the next sink finds them stored and only acks.
package accounting
