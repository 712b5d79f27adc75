package accounting

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// derivedKind is a table of rows derived from the events of another kind.
type derivedKind struct {
	table   string
	columns []string
	// toColumns lays out the rows derived from events, one slice per
	// column, and says how many there are.
	toColumns func(events []row) (int, []any)
	// deriving: the event has rows here; its tenant and time (the
	// table's sort key starts with them) find them.
	deriving func(ev row) (ok bool, tenant string, ts time.Time)
}

// insertDerived stores the rows derived from events, but not those of an
// event whose rows are already there: a sink that died after storing them
// and before storing the event itself stores the event again, not its
// rows. An event's rows share its time, so they are in one partition and
// one insert stores all of them or none.
func (s *store) insertDerived(ctx context.Context, c *derivedKind, events []row) error {
	var ids, tenants []string
	var from, to time.Time
	for _, ev := range events {
		ok, tenant, ts := c.deriving(ev)
		if !ok {
			continue
		}
		if len(ids) == 0 || ts.Before(from) {
			from = ts
		}
		if len(ids) == 0 || ts.After(to) {
			to = ts
		}
		ids, tenants = append(ids, ev.id), append(tenants, tenant)
	}
	if len(ids) == 0 {
		return nil
	}
	stored, err := s.derivedStored(ctx, c.table, ids, tenants, from, to)
	if err != nil {
		return err
	}
	todo := events[:0:0]
	for _, ev := range events {
		if ok, _, _ := c.deriving(ev); ok && !stored[ev.id] {
			todo = append(todo, ev)
		}
	}
	if n, cols := c.toColumns(todo); n > 0 {
		return s.insertColumns(ctx, c.table, c.columns, n, cols)
	}
	return nil
}

// derivedStored says which of ids have rows in table, looking only where
// the table's sort key (tenant, ts) puts them.
func (s *store) derivedStored(ctx context.Context, table string, ids, tenants []string, from, to time.Time) (map[string]bool, error) {
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_query_size": 64 << 20}))
	res, err := s.conn.Query(ctx, "SELECT DISTINCT event_id FROM "+table+" WHERE tenant IN (SELECT arrayJoin(?)) "+
		"AND ts >= toDateTime(?) AND ts <= toDateTime(?) AND event_id IN (SELECT arrayJoin(?))",
		tenants, uint32(from.Unix()), uint32(to.Unix()), ids)
	if err != nil {
		return nil, fmt.Errorf("look up stored rows in %s: %w", table, err)
	}
	defer res.Close()
	stored := map[string]bool{}
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			return nil, err
		}
		stored[id] = true
	}
	return stored, res.Err()
}

// carriesResults: the usage event names tool results its prompt carried.
func carriesResults(ev row) (bool, string, time.Time) {
	e := ev.ev.(*heraldpb.UsageEvent)
	return len(e.GetCarried()) > 0, orDefault(e.GetTenant()), eventTime(e.GetTsUnixMs())
}

// carriedKind stores the tool results each usage event's prompt carried
// (what each tool costs in context, migration 008).
var carriedKind = derivedKind{
	table: "tool_context_costs",
	columns: []string{"event_id", "ts", "tenant", "session_id", "parent_session_id", "call_id", "tool", "model",
		"tokens", "estimated", "input_tokens", "cache_read_tokens", "cache_write_tokens", "cost_nano_usd", "unpriced"},
	toColumns: carriedColumns,
	deriving:  carriesResults,
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
		estimated, unpriced = make([]uint8, 0, n), make([]uint8, 0, n)
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
			unpriced = append(unpriced, boolByte(c.GetUnpriced()))
		}
	}
	return n, []any{ids, ts, tenant, session, parent, call, tool, model, tokens, estimated, input, cacheRead, cacheWrite, cost, unpriced}
}
