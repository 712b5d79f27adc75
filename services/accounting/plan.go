package accounting

import (
	"context"
	"strings"
	"time"
)

// usageFilter selects usage rows for cost queries and dashboard panels.
type usageFilter struct {
	Since   time.Duration
	Session string
	Tenant  string
	// From and To are a window of whole hours (a month), used when Since
	// is 0; To zero: no end.
	From, To time.Time
}

// usagePlan is where a usage query reads from: a roll-up view for whole
// hours at or after edge, and raw rows for [from, edge), the partial first
// hour of the window. Raw rows are read without FINAL: the sink stores each
// event once (the roll-ups rely on that too), and FINAL would turn a
// one-hour range read into a merge of every part.
type usagePlan struct {
	filter usageFilter
	from   time.Time // zero: all time
	edge   time.Time
	to     time.Time // zero: no end
	// family is the filtered session with its subagents and where their
	// rows are (tenants and hours); set by resolve.
	family family
}

func planUsage(f usageFilter, now time.Time) usagePlan {
	p := usagePlan{filter: f}
	if f.Since == 0 && !f.From.IsZero() {
		p.from, p.edge, p.to = f.From.UTC(), f.From.UTC(), f.To.UTC()
		return p
	}
	if f.Since > 0 {
		p.from = now.Add(-f.Since).UTC().Truncate(time.Second)
		p.edge = p.from.Truncate(time.Hour)
		if p.edge.Before(p.from) {
			p.edge = p.edge.Add(time.Hour)
		}
	}
	return p
}

// resolve looks a session filter up with its subagents in session_spans so
// the query reads only their tenant and hours; it reports false when none
// of them has rows at all.
func (s *store) resolve(ctx context.Context, p *usagePlan) (bool, error) {
	if p.filter.Session == "" {
		return true, nil
	}
	f, err := s.sessionFamily(ctx, p.filter.Session)
	if err != nil {
		return false, err
	}
	p.family = f
	return len(f.spans) > 0, nil
}

// groupKey is a grouping's expression over the columns source yields.
type groupKey struct {
	expr    string
	session bool // needs session_id, so the per-session roll-up
	roots   bool // needs root_session_id (rootJoin)
}

// groupKeys are the groupings of CostQuery.By.
var groupKeys = map[string]groupKey{
	"model":    {expr: "model"},
	"provider": {expr: "provider"},
	"tenant":   {expr: "tenant"},
	"purpose":  {expr: "purpose"},
	"session":  {expr: rootSession, session: true, roots: true},
	"day":      {expr: "toString(toDate(hour, 'UTC'))"},
}

func keyFor(by string) groupKey {
	if k, ok := groupKeys[by]; ok {
		return k
	}
	return groupKeys["model"]
}

// sums are the roll-up columns every usage query adds up.
const sums = "calls, errors, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_nano_usd, latency_ms"

// rawSums are the same columns computed per raw row.
const rawSums = "toUInt64(1) AS calls, toUInt64(status != 'ok') AS errors, input_tokens, output_tokens, " +
	"cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_nano_usd, toUInt64(latency_ms) AS latency_ms"

// correctionSums are a price correction's columns (usage_corrections, 007):
// no call, no tokens, the cost's difference modulo 2^64 (sums add it back).
const correctionSums = "toUInt64(0) AS calls, toUInt64(0) AS errors, toUInt64(0) AS input_tokens, toUInt64(0) AS output_tokens, " +
	"toUInt64(0) AS cache_read_tokens, toUInt64(0) AS cache_write_tokens, toUInt64(0) AS reasoning_tokens, " +
	"toUInt64(toInt64(cost_after_nano_usd) - toInt64(cost_before_nano_usd)) AS cost_nano_usd, toUInt64(0) AS latency_ms"

// source is a FROM clause (a subquery) yielding hour, the key columns and the
// sums, combining the roll-up with raw rows of the partial first hour, and
// the arguments its placeholders take, in order.
func (p usagePlan) source(k groupKey) (string, []any) {
	rollup, cols := "usage_hourly", "hour, tenant, provider, model, purpose"
	if p.filter.Session != "" || k.session {
		rollup, cols = "usage_by_session", cols+", session_id"
	}
	var args []any
	where := func(timeCol string, lo, hi time.Time) string {
		var conds []string
		if !lo.IsZero() {
			conds, args = append(conds, timeCol+" >= toDateTime(?)"), append(args, uint32(lo.Unix()))
		}
		if !hi.IsZero() {
			conds, args = append(conds, timeCol+" < toDateTime(?)"), append(args, uint32(hi.Unix()))
		}
		conds = append(conds, p.idConds(timeCol, &args)...)
		if len(conds) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(conds, " AND ")
	}
	q := "(SELECT " + cols + ", " + sums + " FROM " + rollup + where("hour", p.edge, p.to)
	if p.from.Before(p.edge) {
		rawCols := "toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour, " + strings.TrimPrefix(cols, "hour, ")
		q += " UNION ALL SELECT " + rawCols + ", " + rawSums + " FROM usage_events" + where("ts", p.from, p.edge)
		// the roll-ups hold the corrections of their hours (007); the raw
		// rows' are read beside them
		q += " UNION ALL SELECT " + rawCols + ", " + correctionSums + " FROM usage_corrections" + where("ts", p.from, p.edge)
	}
	return q + ")", args
}

// idConds are the tenant and session conditions on a table whose time
// column is timeCol.
func (p usagePlan) idConds(timeCol string, args *[]any) []string {
	var conds []string
	if p.filter.Tenant != "" {
		conds, *args = append(conds, "tenant = ?"), append(*args, p.filter.Tenant)
	}
	if p.filter.Session == "" {
		return conds
	}
	in, ids := sessionIn(p.family.sessions())
	conds, *args = append(conds, in), append(*args, ids...)
	var spans []string
	for _, sp := range p.family.spans {
		spans = append(spans, "(tenant = ? AND "+timeCol+" >= toDateTime(?) AND "+timeCol+" < toDateTime(?))")
		*args = append(*args, sp.tenant, sp.from, sp.to)
	}
	if len(spans) > 0 {
		conds = append(conds, "("+strings.Join(spans, " OR ")+")")
	}
	return conds
}
