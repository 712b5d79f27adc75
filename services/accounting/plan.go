package accounting

import (
	"time"
)

// usageFilter selects usage rows for cost queries and dashboard panels.
type usageFilter struct {
	Since   time.Duration
	From    time.Time // overrides Since when set
	Session string
	Tenant  string
}

// usagePlan is where a usage query reads from: a roll-up view for whole
// hours at or after edge, and raw rows (FINAL: an event stored twice counts
// once) for [from, edge), the partial first hour of the window.
type usagePlan struct {
	filter  usageFilter
	from    time.Time // zero: all time
	edge    time.Time
	session bool // read the per-session roll-up
}

func planUsage(f usageFilter, now time.Time) usagePlan {
	p := usagePlan{filter: f, session: f.Session != ""}
	switch {
	case !f.From.IsZero():
		p.from = f.From.UTC().Truncate(time.Second)
	case f.Since > 0:
		p.from = now.Add(-f.Since).UTC().Truncate(time.Second)
	}
	if !p.from.IsZero() {
		p.edge = p.from.Truncate(time.Hour)
		if p.edge.Before(p.from) {
			p.edge = p.edge.Add(time.Hour)
		}
	}
	return p
}

// groupKey is a grouping's expression over the columns source yields.
type groupKey struct {
	expr    string
	session bool // needs session_id, so the per-session roll-up
}

// groupKeys are the groupings of CostQuery.By.
var groupKeys = map[string]groupKey{
	"model":    {expr: "model"},
	"provider": {expr: "provider"},
	"tenant":   {expr: "tenant"},
	"purpose":  {expr: "purpose"},
	"session":  {expr: "session_id", session: true},
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

// source is a FROM clause (a subquery) yielding hour, the key columns and the
// sums, combining the roll-up with raw rows of the partial first hour. Its
// placeholders are bound by args.
func (p usagePlan) source(k groupKey) string {
	rollup := "usage_hourly"
	if p.session || k.session {
		rollup = "usage_by_session"
	}
	cols := "hour, tenant, provider, model, purpose"
	if rollup == "usage_by_session" {
		cols += ", session_id"
	}
	where := p.where("hour")
	q := "(SELECT " + cols + ", " + sums + " FROM " + rollup + where
	if !p.from.IsZero() {
		rawCols := "toDateTime(intDiv(toUInt32(ts), 3600) * 3600) AS hour, tenant, provider, model, purpose"
		if rollup == "usage_by_session" {
			rawCols += ", session_id"
		}
		q += " UNION ALL SELECT " + rawCols + ", " + rawSums + " FROM usage_events FINAL" + p.rawWhere()
	}
	return q + ")"
}

// where filters a roll-up: whole hours from edge on.
func (p usagePlan) where(hourCol string) string {
	w := " WHERE 1"
	if !p.from.IsZero() {
		w += " AND " + hourCol + " >= toDateTime(?)"
	}
	return w + p.idFilters()
}

func (p usagePlan) rawWhere() string {
	return " WHERE ts >= toDateTime(?) AND ts < toDateTime(?)" + p.idFilters()
}

func (p usagePlan) idFilters() string {
	w := ""
	if p.filter.Tenant != "" {
		w += " AND tenant = ?"
	}
	if p.filter.Session != "" {
		w += " AND session_id = ?"
	}
	return w
}

// args bind source's placeholders in order.
func (p usagePlan) args() []any {
	ids := func() []any {
		var a []any
		if p.filter.Tenant != "" {
			a = append(a, p.filter.Tenant)
		}
		if p.filter.Session != "" {
			a = append(a, p.filter.Session)
		}
		return a
	}
	var args []any
	if !p.from.IsZero() {
		args = append(args, uint32(p.edge.Unix()))
	}
	args = append(args, ids()...)
	if !p.from.IsZero() {
		args = append(args, uint32(p.from.Unix()), uint32(p.edge.Unix()))
		args = append(args, ids()...)
	}
	return args
}
