package accounting

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Correction is one usage_corrections row: a usage row priced again.
type Correction struct {
	EventID           string    `json:"event_id"`
	Seq               uint32    `json:"seq"`
	TS                time.Time `json:"ts"`
	Tenant            string    `json:"tenant"`
	SessionID         string    `json:"session_id"`
	Model             string    `json:"model"`
	CostBeforeNanoUSD uint64    `json:"cost_before_nano_usd"`
	CostAfterNanoUSD  uint64    `json:"cost_after_nano_usd"`
	PriceSourceBefore string    `json:"price_source_before"`
	PriceSourceAfter  string    `json:"price_source_after"`
	CorrectedAt       time.Time `json:"corrected_at"`
	Reason            string    `json:"reason"`
}

// CorrectionsQuery selects corrections by the corrected row's time, model
// and tenant; Limit 0 means 1000.
type CorrectionsQuery struct {
	Since  time.Time
	Model  string
	Tenant string
	Limit  int
}

// QueryCorrections lists price corrections, the latest written first.
func QueryCorrections(ctx context.Context, dsn string, q CorrectionsQuery) ([]Correction, error) {
	if dsn == "" {
		return nil, ErrNoDSN
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	conds, args := []string{"1"}, []any{}
	if !q.Since.IsZero() {
		conds, args = append(conds, "ts >= toDateTime(?)"), append(args, uint32(q.Since.Unix()))
	}
	if q.Model != "" {
		conds, args = append(conds, "model = ?"), append(args, q.Model)
	}
	if q.Tenant != "" {
		conds, args = append(conds, "tenant = ?"), append(args, q.Tenant)
	}
	if q.Limit <= 0 {
		q.Limit = 1000
	}
	rows, err := st.conn.Query(ctx, "SELECT event_id, seq, ts, tenant, session_id, model, cost_before_nano_usd, cost_after_nano_usd, "+
		"price_source_before, price_source_after, corrected_at, reason FROM usage_corrections WHERE "+strings.Join(conds, " AND ")+
		fmt.Sprintf(" ORDER BY corrected_at DESC, ts DESC, event_id, seq DESC LIMIT 1 BY event_id, seq LIMIT %d", q.Limit), args...)
	if err != nil {
		return nil, st.queryError(err)
	}
	defer rows.Close()
	out := []Correction{}
	for rows.Next() {
		var c Correction
		if err := rows.Scan(&c.EventID, &c.Seq, &c.TS, &c.Tenant, &c.SessionID, &c.Model, &c.CostBeforeNanoUSD, &c.CostAfterNanoUSD,
			&c.PriceSourceBefore, &c.PriceSourceAfter, &c.CorrectedAt, &c.Reason); err != nil {
			return nil, err
		}
		c.TS, c.CorrectedAt = c.TS.UTC(), c.CorrectedAt.UTC()
		out = append(out, c)
	}
	return out, st.queryError(rows.Err())
}

// WriteCorrections prints corrections as a table.
func WriteCorrections(w io.Writer, cs []Correction) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CORRECTED AT\tROW\tSEQ\tROW TIME\tTENANT\tMODEL\tCOST USD\tPRICE SOURCE")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s → %s\t%s → %s\n", c.CorrectedAt.Format(time.DateTime), c.EventID, c.Seq,
			c.TS.Format(time.DateTime), c.Tenant, c.Model, formatUSD(c.CostBeforeNanoUSD), formatUSD(c.CostAfterNanoUSD),
			c.PriceSourceBefore, c.PriceSourceAfter)
	}
	return tw.Flush()
}
