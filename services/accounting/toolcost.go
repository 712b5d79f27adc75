package accounting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ToolCostQuery is what `herald cost --by tool` asks.
type ToolCostQuery struct {
	Since time.Duration `json:"since"` // 0: all time
	// Session, when set, limits rows to the session and its subagents.
	Session string `json:"session,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
}

// ToolCostRow is what one tool cost: running it (its runs, run time and
// result size, from tool_events) and carrying its results in the model
// calls that followed (from tool_context_costs).
type ToolCostRow struct {
	Tool        string `json:"tool"`
	Runs        uint64 `json:"runs"`
	Errors      uint64 `json:"errors"`
	DurationMs  uint64 `json:"duration_ms_sum"`
	OutputBytes uint64 `json:"output_bytes"`
	// Carried counts (model call, result) pairs: each model call that
	// carried one of the tool's results counts once per result.
	Carried uint64 `json:"carried"`
	// ContextTokens is the results' tokens summed over the calls that
	// carried them, split by how the provider billed them.
	ContextTokens           uint64  `json:"context_tokens"`
	ContextInputTokens      uint64  `json:"context_input_tokens"`
	ContextCacheReadTokens  uint64  `json:"context_cache_read_tokens"`
	ContextCacheWriteTokens uint64  `json:"context_cache_write_tokens"`
	ContextCostNanoUSD      uint64  `json:"context_cost_nano_usd"`
	ContextCostUSD          float64 `json:"context_cost_usd"`
	// Estimated: some of the tokens are characters/4, not a tokenizer's count.
	Estimated bool `json:"tokens_estimated"`
	// UnpricedCarried counts the carried pairs whose model had no price:
	// their cost is unknown, so ContextCostUSD is a lower bound when any.
	UnpricedCarried uint64 `json:"unpriced_carried"`
}

// ToolCostReport answers a ToolCostQuery: one row per tool, the highest
// context cost first, and their total.
type ToolCostReport struct {
	By        string        `json:"by"`
	Since     string        `json:"since,omitempty"`
	From      time.Time     `json:"from,omitzero"`
	Session   string        `json:"session,omitempty"`
	Subagents []string      `json:"subagent_sessions,omitempty"`
	Tenant    string        `json:"tenant,omitempty"`
	Rows      []ToolCostRow `json:"rows"`
	Total     ToolCostRow   `json:"total"`
}

// ResultCost is what one tool result cost in context.
type ResultCost struct {
	SessionID   string  `json:"session_id"`
	CallID      string  `json:"call_id"`
	Tool        string  `json:"tool"`
	DurationMs  uint32  `json:"duration_ms"`
	OutputBytes uint64  `json:"output_bytes"`
	Carried     uint64  `json:"carried"` // model calls that carried it
	Tokens      uint64  `json:"tokens"`  // its size in the last call that carried it
	Estimated   bool    `json:"tokens_estimated"`
	Unpriced    bool    `json:"unpriced,omitempty"` // some calls that carried it had no price
	CostNanoUSD uint64  `json:"context_cost_nano_usd"`
	CostUSD     float64 `json:"context_cost_usd"`
}

// QueryToolCost answers q from ClickHouse at dsn.
func QueryToolCost(ctx context.Context, dsn string, q ToolCostQuery) (ToolCostReport, error) {
	if dsn == "" {
		return ToolCostReport{}, ErrNoDSN
	}
	if q.Since < 0 {
		return ToolCostReport{}, fmt.Errorf("%w: --since %s is negative", ErrBadQuery, q.Since)
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return ToolCostReport{}, err
	}
	defer st.Close()
	return st.toolCost(ctx, q, time.Now())
}

func (s *store) toolCost(ctx context.Context, q ToolCostQuery, now time.Time) (ToolCostReport, error) {
	rep := ToolCostReport{By: "tool", Session: q.Session, Tenant: q.Tenant, Rows: []ToolCostRow{}}
	var conds []string
	var args []any
	if q.Since > 0 {
		rep.Since, rep.From = q.Since.String(), now.Add(-q.Since).UTC().Truncate(time.Second)
		conds, args = append(conds, "ts >= toDateTime(?)"), append(args, uint32(rep.From.Unix()))
	}
	if q.Tenant != "" {
		conds, args = append(conds, "tenant = ?"), append(args, q.Tenant)
	}
	if q.Session != "" {
		f, err := s.sessionFamily(ctx, q.Session)
		if err != nil {
			return rep, err
		}
		rep.Subagents = f.subagents
		in, ids := sessionIn(f.sessions())
		conds, args = append(conds, in), append(args, ids...)
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	byTool := map[string]*ToolCostRow{}
	row := func(tool string) *ToolCostRow {
		if byTool[tool] == nil {
			byTool[tool] = &ToolCostRow{Tool: tool}
		}
		return byTool[tool]
	}
	if err := s.toolRuns(ctx, where, args, row); err != nil {
		return rep, err
	}
	if err := s.toolContext(ctx, where, args, row); err != nil {
		return rep, noContextTable(err)
	}
	for _, r := range byTool {
		r.ContextCostUSD = nanoToUSD(r.ContextCostNanoUSD)
		rep.Rows = append(rep.Rows, *r)
		rep.Total.add(*r)
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		a, b := rep.Rows[i], rep.Rows[j]
		if a.ContextCostNanoUSD != b.ContextCostNanoUSD {
			return a.ContextCostNanoUSD > b.ContextCostNanoUSD
		}
		if a.ContextTokens != b.ContextTokens {
			return a.ContextTokens > b.ContextTokens
		}
		return a.Tool < b.Tool
	})
	rep.Total.Tool, rep.Total.ContextCostUSD = "total", nanoToUSD(rep.Total.ContextCostNanoUSD)
	return rep, nil
}

// toolRuns adds each tool's runs from tool_events.
func (s *store) toolRuns(ctx context.Context, where string, args []any, row func(string) *ToolCostRow) error {
	res, err := s.conn.Query(ctx, "SELECT tool, count(), countIf(status != 'ok'), sum(duration_ms), sum(output_bytes) "+
		"FROM tool_events"+where+" GROUP BY tool", args...)
	if err != nil {
		return s.queryError(err)
	}
	defer res.Close()
	for res.Next() {
		var tool string
		var runs, errs, ms, bytes uint64
		if err := res.Scan(&tool, &runs, &errs, &ms, &bytes); err != nil {
			return err
		}
		r := row(tool)
		r.Runs, r.Errors, r.DurationMs, r.OutputBytes = runs, errs, ms, bytes
	}
	return s.queryError(res.Err())
}

// toolContext adds what carrying each tool's results cost.
func (s *store) toolContext(ctx context.Context, where string, args []any, row func(string) *ToolCostRow) error {
	res, err := s.conn.Query(ctx, "SELECT tool, count(), sum(tokens), sum(input_tokens), sum(cache_read_tokens), "+
		"sum(cache_write_tokens), sum(cost_nano_usd), max(estimated), sum(unpriced) FROM tool_context_costs"+where+" GROUP BY tool", args...)
	if err != nil {
		return s.queryError(err)
	}
	defer res.Close()
	for res.Next() {
		var tool string
		var c ToolCostRow
		var estimated uint8
		if err := res.Scan(&tool, &c.Carried, &c.ContextTokens, &c.ContextInputTokens, &c.ContextCacheReadTokens,
			&c.ContextCacheWriteTokens, &c.ContextCostNanoUSD, &estimated, &c.UnpricedCarried); err != nil {
			return err
		}
		r := row(tool)
		r.Carried, r.ContextTokens, r.ContextInputTokens = c.Carried, c.ContextTokens, c.ContextInputTokens
		r.ContextCacheReadTokens, r.ContextCacheWriteTokens = c.ContextCacheReadTokens, c.ContextCacheWriteTokens
		r.ContextCostNanoUSD, r.Estimated, r.UnpricedCarried = c.ContextCostNanoUSD, estimated == 1, c.UnpricedCarried
	}
	return s.queryError(res.Err())
}

func (r *ToolCostRow) add(o ToolCostRow) {
	r.Runs += o.Runs
	r.Errors += o.Errors
	r.DurationMs += o.DurationMs
	r.OutputBytes += o.OutputBytes
	r.Carried += o.Carried
	r.ContextTokens += o.ContextTokens
	r.ContextInputTokens += o.ContextInputTokens
	r.ContextCacheReadTokens += o.ContextCacheReadTokens
	r.ContextCacheWriteTokens += o.ContextCacheWriteTokens
	r.ContextCostNanoUSD += o.ContextCostNanoUSD
	r.Estimated = r.Estimated || o.Estimated
	r.UnpricedCarried += o.UnpricedCarried
}

// WriteTable prints the report as an aligned table with a total line;
// estimated token counts are marked ~.
func (r ToolCostReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "TOOL\truns\terrors\trun time\tresult bytes\tcarried\tcontext tokens\tcache read\tcontext cost USD\t\n")
	line := func(c ToolCostRow) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t\n", c.Tool, c.Runs, c.Errors, runTime(c.DurationMs), c.OutputBytes,
			c.Carried, approx(c.ContextTokens, c.Estimated), approx(c.ContextCacheReadTokens, c.Estimated), costCell(c.ContextCostNanoUSD, c.UnpricedCarried))
	}
	for _, row := range r.Rows {
		line(row)
	}
	fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t\t\n", strings.Repeat("-", 5))
	line(r.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Total.Estimated {
		fmt.Fprintln(w, "~ tokens estimated as characters/4 (Herald has no tokenizer for the model); context cost is what carrying each tool's results cost in the model calls that followed (docs/COSTS.md)")
	}
	if r.Total.UnpricedCarried > 0 {
		fmt.Fprintln(w, "some results were carried in calls whose model had no price: a cost marked ≥ is a lower bound and n/a is unknown; add the model under pricing: in herald.yaml")
	}
	if len(r.Subagents) > 0 {
		_, err := fmt.Fprintf(w, "session %s includes its %d subagent session(s): %s\n", r.Session, len(r.Subagents), strings.Join(r.Subagents, ", "))
		return err
	}
	return nil
}

func approx(n uint64, estimated bool) string {
	if estimated && n > 0 {
		return fmt.Sprintf("~%d", n)
	}
	return fmt.Sprint(n)
}

func runTime(ms uint64) string {
	if ms < 10_000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// maxTopResults bounds the costliest results a session page lists.
const maxTopResults = 10

// topResults are the session family's costliest tool results in context,
// with their runs' time and size from tools (the family's tool runs).
func (s *store) topResults(ctx context.Context, sp sessionSpan, sessions []string, tools []ToolEntry) ([]ResultCost, error) {
	in, ids := sessionIn(sessions)
	args := append(append([]any{sp.tenant, sp.from, sp.to}, ids...), maxTopResults)
	res, err := s.conn.Query(ctx, "SELECT session_id, call_id, any(tool), count(), argMax(tokens, ts), max(estimated), sum(cost_nano_usd), max(unpriced) "+
		"FROM tool_context_costs WHERE tenant = ? AND ts >= toDateTime(?) AND ts < toDateTime(?) AND "+in+
		" GROUP BY session_id, call_id ORDER BY sum(cost_nano_usd) DESC, sum(tokens) DESC, call_id LIMIT ?", args...)
	if err != nil {
		return nil, s.queryError(err)
	}
	defer res.Close()
	runs := map[string]ToolEntry{}
	for _, t := range tools {
		runs[t.SessionID+":"+t.CallID] = t
	}
	out := []ResultCost{}
	for res.Next() {
		var c ResultCost
		var estimated, unpriced uint8
		if err := res.Scan(&c.SessionID, &c.CallID, &c.Tool, &c.Carried, &c.Tokens, &estimated, &c.CostNanoUSD, &unpriced); err != nil {
			return nil, err
		}
		c.Unpriced = unpriced == 1
		run := runs[c.SessionID+":"+c.CallID]
		c.Estimated, c.CostUSD, c.DurationMs, c.OutputBytes = estimated == 1, nanoToUSD(c.CostNanoUSD), run.DurationMs, run.OutputSize
		out = append(out, c)
	}
	return out, s.queryError(res.Err())
}

// familyTopResults merges the costliest results of each of the family's spans.
func (s *store) familyTopResults(ctx context.Context, f family, tools []ToolEntry) ([]ResultCost, error) {
	out := []ResultCost{}
	for _, sp := range f.spans {
		top, err := s.topResults(ctx, sp, f.sessions(), tools)
		if err != nil {
			return nil, err
		}
		out = append(out, top...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CostNanoUSD > out[j].CostNanoUSD })
	return out[:min(len(out), maxTopResults)], nil
}

// noContextTable names the fix when the database predates migration 008.
func noContextTable(err error) error {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && ex.Code == 60 {
		return fmt.Errorf("this ClickHouse database has no tool_context_costs table yet (migration 008): run `herald migrate`, or start accounting, which applies it: %w", err)
	}
	return err
}
