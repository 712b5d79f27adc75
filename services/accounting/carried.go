package accounting

import (
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// derivedKind is a table of rows derived from the events of another kind.
type derivedKind struct {
	table   string
	columns []string
	// toColumns lays out the rows derived from events, one slice per
	// column, and says how many there are.
	toColumns func(events []row) (int, []any)
}

// carriedKind stores the tool results each usage event's prompt carried
// (what each tool costs in context, migration 008).
var carriedKind = derivedKind{
	table: "tool_context_costs",
	columns: []string{"event_id", "ts", "tenant", "session_id", "parent_session_id", "call_id", "tool", "model",
		"tokens", "estimated", "input_tokens", "cache_read_tokens", "cache_write_tokens", "cost_nano_usd"},
	toColumns: carriedColumns,
}

func carriedColumns(events []row) (int, []any) {
	n := 0
	for _, r := range events {
		n += len(r.ev.(*heraldpb.UsageEvent).GetCarried())
	}
	if n == 0 {
		return 0, nil
	}
	var (
		ids, tenant, session, parent, call, tool, model = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n),
			make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		ts                                         = make([]time.Time, 0, n)
		tokens, input, cacheRead, cacheWrite, cost = make([]uint64, 0, n), make([]uint64, 0, n), make([]uint64, 0, n),
			make([]uint64, 0, n), make([]uint64, 0, n)
		estimated = make([]uint8, 0, n)
	)
	for _, r := range events {
		e := r.ev.(*heraldpb.UsageEvent)
		for _, c := range e.GetCarried() {
			ids, ts = append(ids, r.id), append(ts, eventTime(e.GetTsUnixMs()))
			tenant, session, parent = append(tenant, orDefault(e.GetTenant())), append(session, e.GetSessionId()), append(parent, e.GetParentSessionId())
			call, tool, model = append(call, c.GetCallId()), append(tool, c.GetTool()), append(model, e.GetModel())
			tokens, estimated = append(tokens, count(c.GetTokens())), append(estimated, boolByte(c.GetEstimated()))
			input, cacheRead = append(input, count(c.GetInputTokens())), append(cacheRead, count(c.GetCacheReadTokens()))
			cacheWrite, cost = append(cacheWrite, count(c.GetCacheWriteTokens())), append(cost, c.GetCostNanoUsd())
		}
	}
	return n, []any{ids, ts, tenant, session, parent, call, tool, model, tokens, estimated, input, cacheRead, cacheWrite, cost}
}
