package accounting

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// RepriceQuery is what `herald cost reprice` asks: the rows at or after
// Since (zero: all) of Model (empty: every model) priced again.
type RepriceQuery struct {
	Since time.Time
	Model string
	// Reason is written with each correction (who ran it, and why).
	Reason string
	// DryRun reports what would be corrected and writes nothing.
	DryRun bool
}

// RepriceReport is what a reprice changed: rows read, rows corrected (of
// them, rows that had no price and have one now), and their cost before
// and after, in total and by model.
type RepriceReport struct {
	Since      time.Time         `json:"since,omitzero"`
	Model      string            `json:"model,omitempty"`
	DryRun     bool              `json:"dry_run,omitempty"`
	Rows       uint64            `json:"rows"`
	Corrected  uint64            `json:"corrected"`
	NowPriced  uint64            `json:"now_priced"`
	BeforeNano uint64            `json:"cost_before_nano_usd"`
	AfterNano  uint64            `json:"cost_after_nano_usd"`
	ByModel    []RepriceModelRow `json:"by_model"`
}

// RepriceModelRow is one model's share of a reprice.
type RepriceModelRow struct {
	Model      string `json:"model"`
	Corrected  uint64 `json:"corrected"`
	NowPriced  uint64 `json:"now_priced"`
	BeforeNano uint64 `json:"cost_before_nano_usd"`
	AfterNano  uint64 `json:"cost_after_nano_usd"`
}

// Reprice prices the usage rows q selects again with table, each by the
// entry in force at its time, and writes a correction row
// (usage_corrections, 007) for each whose figure changes. A row no price
// covers is left alone; a second run with the same prices changes nothing.
// Only one reprice may run at a time (the CLI holds a lease for it): two at
// once would both correct a row.
func Reprice(ctx context.Context, dsn string, table pricing.Table, q RepriceQuery, now time.Time) (RepriceReport, error) {
	if dsn == "" {
		return RepriceReport{}, ErrNoDSN
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return RepriceReport{}, err
	}
	defer st.Close()
	return st.reprice(ctx, table, q, now)
}

// figure is a row's cost as it stands: its latest correction's, or its own.
type figure struct {
	seq    uint32
	cost   uint64
	source string
}

// correction is one usage_corrections row.
type correction struct {
	eventID, tenant, session, parent, provider, model, purpose string
	seq                                                        uint32
	ts                                                         time.Time
	before, after                                              figure
}

const repriceBatch = 10_000

func (s *store) reprice(ctx context.Context, table pricing.Table, q RepriceQuery, now time.Time) (RepriceReport, error) {
	rep := RepriceReport{Since: q.Since, Model: q.Model, DryRun: q.DryRun, ByModel: []RepriceModelRow{}}
	conds, args := []string{"1"}, []any{}
	if !q.Since.IsZero() {
		conds, args = append(conds, "ts >= toDateTime(?)"), append(args, uint32(q.Since.Unix()))
	}
	if q.Model != "" {
		conds, args = append(conds, "model = ?"), append(args, q.Model)
	}
	where := " WHERE " + strings.Join(conds, " AND ")
	latest, err := s.latestFigures(ctx, where, args)
	if err != nil {
		return rep, err
	}
	rows, err := s.conn.Query(ctx, "SELECT event_id, ts, tenant, session_id, parent_session_id, provider, model, purpose, "+
		"input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_nano_usd, price_source "+
		"FROM usage_events"+where+" ORDER BY ts, event_id", args...)
	if err != nil {
		return rep, s.queryError(err)
	}
	defer rows.Close()
	tally := map[string]*RepriceModelRow{}
	var pending []correction
	for rows.Next() {
		c, u, err := scanRepriceRow(rows)
		if err != nil {
			return rep, err
		}
		rep.Rows++
		changed, err := c.reprice(table, latest, u)
		if err != nil {
			return rep, err
		}
		if !changed {
			continue
		}
		countCorrection(tally, c)
		if !q.DryRun {
			pending = append(pending, c)
		}
		if len(pending) == repriceBatch {
			if err := s.insertCorrections(ctx, pending, q.Reason, now); err != nil {
				return rep, err
			}
			pending = pending[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return rep, s.queryError(err)
	}
	if err := s.insertCorrections(ctx, pending, q.Reason, now); err != nil {
		return rep, err
	}
	rep.add(tally)
	return rep, nil
}

// scanRepriceRow reads one usage row as a correction to be, with its usage.
func scanRepriceRow(rows driver.Rows) (correction, *heraldpb.Usage, error) {
	var c correction
	var in, out, read, write, reasoning uint64
	err := rows.Scan(&c.eventID, &c.ts, &c.tenant, &c.session, &c.parent, &c.provider, &c.model, &c.purpose,
		&in, &out, &read, &write, &reasoning, &c.before.cost, &c.before.source)
	u := &heraldpb.Usage{InputTokens: int64(in), OutputTokens: int64(out), CacheReadTokens: int64(read),
		CacheWriteTokens: int64(write), ReasoningTokens: int64(reasoning)}
	return c, u, err
}

// reprice prices c's row again with table, from its latest figure (its
// own, or its latest correction's): changed when a correction is due, then
// c holds it. A row no price covers is left alone.
func (c *correction) reprice(table pricing.Table, latest map[string]figure, u *heraldpb.Usage) (bool, error) {
	original := c.before.source
	if f, ok := latest[c.eventID]; ok {
		c.before = f
	}
	after, source, err := table.RepriceAt(c.model, c.ts, u, original)
	if err != nil {
		return false, fmt.Errorf("usage row %s: %w", c.eventID, err)
	}
	if priceWord(source) == pricing.SourceUnknown || (after == c.before.cost && source == c.before.source) {
		return false, nil
	}
	c.seq, c.after = c.before.seq+1, figure{cost: after, source: source}
	return true, nil
}

func countCorrection(tally map[string]*RepriceModelRow, c correction) {
	m := tally[c.model]
	if m == nil {
		m = &RepriceModelRow{Model: c.model}
		tally[c.model] = m
	}
	m.Corrected++
	m.BeforeNano += c.before.cost
	m.AfterNano += c.after.cost
	if priceWord(c.before.source) == pricing.SourceUnknown {
		m.NowPriced++
	}
}

// add puts the per-model tally in the report, by model name.
func (r *RepriceReport) add(tally map[string]*RepriceModelRow) {
	for _, m := range tally {
		r.ByModel = append(r.ByModel, *m)
		r.Corrected += m.Corrected
		r.NowPriced += m.NowPriced
		r.BeforeNano += m.BeforeNano
		r.AfterNano += m.AfterNano
	}
	sort.Slice(r.ByModel, func(i, j int) bool { return r.ByModel[i].Model < r.ByModel[j].Model })
}

// priceWord is a price_source's first word (config, imported, builtin, unknown).
func priceWord(source string) string {
	w, _, _ := strings.Cut(source, ";")
	return w
}

// latestFigures are the corrected rows' figures as they stand, by event id.
func (s *store) latestFigures(ctx context.Context, where string, args []any) (map[string]figure, error) {
	rows, err := s.conn.Query(ctx, "SELECT event_id, max(seq), argMax(cost_after_nano_usd, seq), argMax(price_source_after, seq) "+
		"FROM usage_corrections"+where+" GROUP BY event_id", args...)
	if err != nil {
		return nil, s.queryError(err)
	}
	defer rows.Close()
	out := map[string]figure{}
	for rows.Next() {
		var id string
		var f figure
		if err := rows.Scan(&id, &f.seq, &f.cost, &f.source); err != nil {
			return nil, err
		}
		out[id] = f
	}
	return out, s.queryError(rows.Err())
}

func (s *store) insertCorrections(ctx context.Context, cs []correction, reason string, now time.Time) error {
	if len(cs) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO usage_corrections (event_id, seq, ts, tenant, session_id, parent_session_id, "+
		"provider, model, purpose, cost_before_nano_usd, cost_after_nano_usd, price_source_before, price_source_after, corrected_at, reason)")
	if err != nil {
		return fmt.Errorf("prepare insert into usage_corrections: %w", err)
	}
	defer batch.Abort()
	for _, c := range cs {
		if err := batch.Append(c.eventID, c.seq, c.ts, c.tenant, c.session, c.parent, c.provider, c.model, c.purpose,
			c.before.cost, c.after.cost, c.before.source, c.after.source, now.UTC(), reason); err != nil {
			return fmt.Errorf("append correction of %s: %w", c.eventID, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d corrections: %w", len(cs), err)
	}
	return nil
}

// WriteTable prints what the reprice changed.
func (r RepriceReport) WriteTable(w io.Writer) error {
	if r.Corrected == 0 {
		_, err := fmt.Fprintf(w, "%d usage rows read; none changed: every row is priced by the prices in force at its time\n", r.Rows)
		return err
	}
	verb := "corrected"
	if r.DryRun {
		verb = "would be corrected (dry run: nothing written)"
	}
	fmt.Fprintf(w, "%d usage rows read; %d %s (%d had no price), cost %s → %s USD\n", r.Rows, r.Corrected, verb, r.NowPriced,
		formatUSD(r.BeforeNano), formatUSD(r.AfterNano))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "MODEL\tcorrected\tunpriced before\tcost before USD\tcost after USD\t\n")
	for _, m := range r.ByModel {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t\n", m.Model, m.Corrected, m.NowPriced, formatUSD(m.BeforeNano), formatUSD(m.AfterNano))
	}
	if err := tw.Flush(); err != nil || r.DryRun {
		return err
	}
	_, err := fmt.Fprintln(w, "each correction is a row of usage_corrections (the usage rows are unchanged); every cost view shows the corrected figures")
	return err
}
