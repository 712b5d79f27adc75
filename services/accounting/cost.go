package accounting

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// CostQuery is what `herald cost` asks.
type CostQuery struct {
	// By groups rows: model, provider, session, tenant, day or purpose
	// (empty means model).
	By string `json:"by"`
	// Since limits rows to the last Since; 0 means all time.
	Since time.Duration `json:"since"`
	// Session and Tenant filter rows when set; a session's rows include its
	// subagents' (delegate_task children).
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	// Month limits rows to one calendar month in UTC ("2026-11"); not
	// with Since.
	Month string `json:"month,omitempty"`
}

// MonthRange is the UTC window of a month written 2026-11.
func MonthRange(month string) (from, to time.Time, err error) {
	from, err = time.Parse("2006-01", month)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("%w: month %q: want YYYY-MM, e.g. 2026-11", ErrBadQuery, month)
	}
	return from, from.AddDate(0, 1, 0), nil
}

// Groupings a CostQuery may ask for.
var CostGroupings = []string{"model", "provider", "session", "tenant", "day", "purpose"}

// CostRow is the usage of one group.
type CostRow struct {
	Key              string  `json:"key"`
	Calls            uint64  `json:"calls"`
	Errors           uint64  `json:"errors"`
	InputTokens      uint64  `json:"input_tokens"`
	OutputTokens     uint64  `json:"output_tokens"`
	CacheReadTokens  uint64  `json:"cache_read_tokens"`
	CacheWriteTokens uint64  `json:"cache_write_tokens"`
	ReasoningTokens  uint64  `json:"reasoning_tokens"`
	CostNanoUSD      uint64  `json:"cost_nano_usd"`
	CostUSD          float64 `json:"cost_usd"`
	// LatencyMs is the summed latency of the calls (mean = LatencyMs/Calls).
	LatencyMs uint64 `json:"latency_ms_sum"`
	// UnpricedCalls are calls whose model had no price: their cost is
	// unknown, so CostUSD is a lower bound when there are any.
	UnpricedCalls uint64 `json:"unpriced_calls"`
}

// CostReport is the answer to a CostQuery: one row per group, most
// expensive first, and their total.
type CostReport struct {
	By      string    `json:"by"`
	Since   string    `json:"since,omitempty"`
	From    time.Time `json:"from,omitzero"`
	Session string    `json:"session,omitempty"`
	// Subagents are the delegated child sessions whose usage Session's
	// figures include.
	Subagents []string  `json:"subagent_sessions,omitempty"`
	Tenant    string    `json:"tenant,omitempty"`
	Month     string    `json:"month,omitempty"`
	Rows      []CostRow `json:"rows"`
	Total     CostRow   `json:"total"`
}

// QueryCost answers q from ClickHouse at dsn. Whole hours are read from the
// roll-up views and only the partial first hour of a --since window from
// raw rows, so the answer is exact and fast.
func QueryCost(ctx context.Context, dsn string, q CostQuery) (CostReport, error) {
	if dsn == "" {
		return CostReport{}, ErrNoDSN
	}
	if err := q.validate(); err != nil {
		return CostReport{}, err
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return CostReport{}, err
	}
	defer st.Close()
	return st.queryCost(ctx, q, time.Now())
}

func (q *CostQuery) validate() error {
	if q.By == "" {
		q.By = "model"
	}
	if q.Month != "" {
		if q.Since != 0 {
			return fmt.Errorf("%w: --month and --since: ask for one window", ErrBadQuery)
		}
		if _, _, err := MonthRange(q.Month); err != nil {
			return err
		}
	}
	for _, g := range CostGroupings {
		if q.By == g {
			if q.Since < 0 {
				return fmt.Errorf("%w: --since %s is negative", ErrBadQuery, q.Since)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: --by %q: want one of %s", ErrBadQuery, q.By, strings.Join(CostGroupings, ", "))
}

func (s *store) queryCost(ctx context.Context, q CostQuery, now time.Time) (CostReport, error) {
	f := usageFilter{Since: q.Since, Session: q.Session, Tenant: q.Tenant}
	if q.Month != "" {
		f.From, f.To, _ = MonthRange(q.Month) // validated
	}
	plan := planUsage(f, now)
	rows := []CostRow{}
	found, err := s.resolve(ctx, &plan)
	if found {
		rows, err = s.groupUsage(ctx, plan, keyFor(q.By), 0)
	}
	if err == nil && found {
		err = s.addUnpriced(ctx, plan, keyFor(q.By), rows)
	}
	if err != nil {
		return CostReport{}, err
	}
	if q.Session != "" && q.By == "session" && len(rows) > 0 {
		// One row for the session asked about: a child's rows would
		// otherwise be keyed by its parent.
		one := totalOf(rows)
		one.Key = q.Session
		rows = []CostRow{one}
	}
	rep := CostReport{By: q.By, Session: q.Session, Subagents: plan.family.subagents, Tenant: q.Tenant, Month: q.Month, Rows: rows, Total: totalOf(rows)}
	if q.Since > 0 {
		rep.Since, rep.From = q.Since.String(), plan.from
	}
	return rep, nil
}

// groupUsage sums usage per key, most expensive first; limit 0 means all.
func (s *store) groupUsage(ctx context.Context, plan usagePlan, key groupKey, limit int) ([]CostRow, error) {
	from, args := plan.source(key)
	if key.roots {
		from += rootJoin
	}
	sql := "SELECT " + key.expr + " AS k, sum(calls), sum(errors), sum(input_tokens), sum(output_tokens), " +
		"sum(cache_read_tokens), sum(cache_write_tokens), sum(reasoning_tokens), sum(cost_nano_usd), sum(latency_ms) " +
		"FROM " + from + " GROUP BY k ORDER BY sum(cost_nano_usd) DESC, k"
	if limit > 0 {
		sql += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.queryError(err)
	}
	defer rows.Close()
	out := []CostRow{}
	for rows.Next() {
		var r CostRow
		if err := rows.Scan(&r.Key, &r.Calls, &r.Errors, &r.InputTokens, &r.OutputTokens,
			&r.CacheReadTokens, &r.CacheWriteTokens, &r.ReasoningTokens, &r.CostNanoUSD, &r.LatencyMs); err != nil {
			return nil, err
		}
		r.CostUSD = nanoToUSD(r.CostNanoUSD)
		out = append(out, r)
	}
	return out, s.queryError(rows.Err())
}

func totalOf(rows []CostRow) CostRow {
	t := CostRow{Key: "total"}
	for _, r := range rows {
		t.add(r)
	}
	t.CostUSD = nanoToUSD(t.CostNanoUSD)
	return t
}

// queryError turns a lost connection into the error that says where.
func (s *store) queryError(err error) error {
	if err == nil || isServerException(err) {
		return err
	}
	return &UnreachableError{Addr: s.addr, Err: err}
}

func (r *CostRow) add(o CostRow) {
	r.Calls += o.Calls
	r.Errors += o.Errors
	r.InputTokens += o.InputTokens
	r.OutputTokens += o.OutputTokens
	r.CacheReadTokens += o.CacheReadTokens
	r.CacheWriteTokens += o.CacheWriteTokens
	r.ReasoningTokens += o.ReasoningTokens
	r.CostNanoUSD += o.CostNanoUSD
	r.LatencyMs += o.LatencyMs
	r.UnpricedCalls += o.UnpricedCalls
}

func nanoToUSD(n uint64) float64 { return float64(n) / 1e9 }

// WriteTable prints the report as an aligned table with a total line.
func (r CostReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tcalls\tinput\toutput\tcache read\tcache write\treasoning\tcost USD\tunpriced\t\n", strings.ToUpper(r.By))
	line := func(c CostRow) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", c.Key, c.Calls, c.InputTokens, c.OutputTokens,
			c.CacheReadTokens, c.CacheWriteTokens, c.ReasoningTokens, costCell(c.CostNanoUSD, c.UnpricedCalls), c.UnpricedCalls)
	}
	for _, row := range r.Rows {
		line(row)
	}
	fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t\t\n", strings.Repeat("-", 5))
	line(r.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Total.UnpricedCalls > 0 {
		fmt.Fprintf(w, "%d calls had no price (their model is not in the price table): their cost is unknown, so a cost marked ≥ is a lower bound and n/a is unknown; add the model under pricing: in herald.yaml\n", r.Total.UnpricedCalls)
	}
	if len(r.Subagents) > 0 {
		_, err := fmt.Fprintf(w, "session %s includes its %d subagent session(s): %s\n", r.Session, len(r.Subagents), strings.Join(r.Subagents, ", "))
		return err
	}
	return nil
}

// costCell is a cost as far as it is known: n/a when every call of it was
// unpriced, a lower bound (≥) when some were.
func costCell(nano, unpriced uint64) string {
	switch {
	case unpriced == 0:
		return formatUSD(nano)
	case nano == 0:
		return "n/a"
	}
	return "≥" + formatUSD(nano)
}

// formatUSD shows cents for large amounts and six decimals for small ones,
// since one model call often costs a fraction of a cent.
func formatUSD(nano uint64) string {
	usd := nanoToUSD(nano)
	if usd >= 100 {
		return fmt.Sprintf("%.2f", usd)
	}
	return fmt.Sprintf("%.6f", usd)
}

// addUnpriced counts each row's unpriced calls (usage_unpriced, 005).
func (s *store) addUnpriced(ctx context.Context, plan usagePlan, key groupKey, rows []CostRow) error {
	var args []any
	var conds []string
	if !plan.from.IsZero() {
		conds, args = append(conds, "ts >= toDateTime(?)"), append(args, uint32(plan.from.Unix()))
	}
	if !plan.to.IsZero() {
		conds, args = append(conds, "ts < toDateTime(?)"), append(args, uint32(plan.to.Unix()))
	}
	conds = append(conds, plan.idConds("hour", &args)...)
	// a row `herald cost reprice` priced since is priced (007)
	conds = append(conds, "event_id NOT IN (SELECT event_id FROM usage_corrections WHERE price_source_before = 'unknown' OR price_source_before LIKE 'unknown;%')")
	from := "usage_unpriced"
	if key.roots {
		from += rootJoin
	}
	sql := "SELECT " + key.expr + " AS k, uniqExact(event_id) FROM " + from
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	res, err := s.conn.Query(ctx, sql+" GROUP BY k", args...)
	if err != nil {
		return s.queryError(err)
	}
	defer res.Close()
	counts := map[string]uint64{}
	for res.Next() {
		var k string
		var n uint64
		if err := res.Scan(&k, &n); err != nil {
			return err
		}
		counts[k] = n
	}
	for i := range rows {
		rows[i].UnpricedCalls = counts[rows[i].Key]
	}
	return s.queryError(res.Err())
}
