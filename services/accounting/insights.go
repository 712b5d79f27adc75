package accounting

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Insights is `herald insights`: where time and money went over a window,
// read from the raw event tables (FINAL, so an event stored twice counts once).
type Insights struct {
	Since    string           `json:"since,omitempty"`
	From     time.Time        `json:"from,omitzero"`
	Models   []ModelInsight   `json:"models"`
	Tools    []ToolInsight    `json:"tools"`
	Sessions []SessionInsight `json:"sessions"`
	Errors   []ErrorInsight   `json:"errors"`
}

// ModelInsight is one model's calls, most expensive first.
type ModelInsight struct {
	Model         string  `json:"model"`
	Calls         uint64  `json:"calls"`
	Errors        uint64  `json:"errors"`
	InputTokens   uint64  `json:"input_tokens"`
	OutputTokens  uint64  `json:"output_tokens"`
	CostUSD       float64 `json:"cost_usd"`
	MeanLatencyMs float64 `json:"mean_latency_ms"`
	// UnpricedCalls had no price: CostUSD leaves them out.
	UnpricedCalls uint64 `json:"unpriced_calls"`
}

// ToolInsight is one tool's executions, most run first.
type ToolInsight struct {
	Tool          string  `json:"tool"`
	Runs          uint64  `json:"runs"`
	Failures      uint64  `json:"failures"`
	MeanLatencyMs float64 `json:"mean_latency_ms"`
	P95LatencyMs  float64 `json:"p95_latency_ms"`
}

// SessionInsight is one session's spend, most expensive first.
type SessionInsight struct {
	SessionID string  `json:"session_id"`
	Tenant    string  `json:"tenant"`
	Calls     uint64  `json:"calls"`
	CostUSD   float64 `json:"cost_usd"`
	Last      string  `json:"last"`
}

// ErrorInsight counts one class of failure: a provider error class, or a
// tool status other than ok ("tool:timeout").
type ErrorInsight struct {
	Class string `json:"class"`
	Count uint64 `json:"count"`
	// LastMessage is what the provider said the last time (redacted by the
	// gateway); empty for tool statuses and rows stored before migration 006.
	LastMessage string `json:"last_message,omitempty"`
}

// insightRows bounds each list of the report.
const insightRows = 10

// QueryInsights reads the report for the last since (0: all time).
func QueryInsights(ctx context.Context, dsn string, since time.Duration) (Insights, error) {
	if dsn == "" {
		return Insights{}, ErrNoDSN
	}
	if since < 0 {
		return Insights{}, fmt.Errorf("%w: --since %s is negative", ErrBadQuery, since)
	}
	st, err := openExisting(ctx, dsn)
	if err != nil {
		return Insights{}, err
	}
	defer st.Close()
	var in Insights
	if since > 0 {
		in.Since, in.From = windowName(since), time.Now().Add(-since).UTC().Truncate(time.Second)
	}
	for _, q := range []func(context.Context, *store, *Insights) error{insightModels, insightTools, insightSessions, insightErrors} {
		if err := q(ctx, st, &in); err != nil {
			return Insights{}, err
		}
	}
	return in, nil
}

// windowName says a window in days when it is whole days ("7d").
func windowName(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// from is the window's start as ClickHouse compares it (epoch 0: all time).
func (in *Insights) from() time.Time {
	if in.From.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return in.From
}

// correctedJoin gives raw usage rows their corrected cost where `herald
// cost reprice` corrected them (usage_corrections, 007); its placeholder is
// the window's start.
const correctedJoin = ` ANY LEFT JOIN (SELECT event_id, argMax(cost_after_nano_usd, seq) AS corrected_nano, toUInt8(1) AS corrected_has
		FROM usage_corrections WHERE ts >= ? GROUP BY event_id) USING event_id`

// correctedCost is a raw row's cost as it stands, under correctedJoin.
const correctedCost = "if(corrected_has = 1, corrected_nano, cost_nano_usd)"

func insightModels(ctx context.Context, st *store, in *Insights) error {
	rows, err := st.conn.Query(ctx, `SELECT model, count(), countIf(status != 'ok'),
		sum(input_tokens + cache_read_tokens + cache_write_tokens), sum(output_tokens), sum(`+correctedCost+`) AS cost, avg(latency_ms),
		countIf(price_source = 'unknown' AND corrected_has = 0 AND input_tokens + output_tokens + cache_read_tokens + cache_write_tokens > 0)
		FROM usage_events FINAL`+correctedJoin+` WHERE ts >= ? GROUP BY model ORDER BY cost DESC, count() DESC LIMIT ?`,
		in.from(), in.from(), insightRows)
	if err != nil {
		return fmt.Errorf("insights: models: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m ModelInsight
		var nano uint64
		if err := rows.Scan(&m.Model, &m.Calls, &m.Errors, &m.InputTokens, &m.OutputTokens, &nano, &m.MeanLatencyMs, &m.UnpricedCalls); err != nil {
			return fmt.Errorf("insights: models: %w", err)
		}
		m.CostUSD = insightUSD(nano)
		in.Models = append(in.Models, m)
	}
	return rows.Err()
}

func insightTools(ctx context.Context, st *store, in *Insights) error {
	rows, err := st.conn.Query(ctx, `SELECT tool, count(), countIf(status != 'ok'), avg(duration_ms), toFloat64(quantile(0.95)(duration_ms))
		FROM tool_events FINAL WHERE ts >= ? GROUP BY tool ORDER BY count() DESC, tool LIMIT ?`, in.from(), insightRows)
	if err != nil {
		return fmt.Errorf("insights: tools: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t ToolInsight
		if err := rows.Scan(&t.Tool, &t.Runs, &t.Failures, &t.MeanLatencyMs, &t.P95LatencyMs); err != nil {
			return fmt.Errorf("insights: tools: %w", err)
		}
		in.Tools = append(in.Tools, t)
	}
	return rows.Err()
}

func insightSessions(ctx context.Context, st *store, in *Insights) error {
	rows, err := st.conn.Query(ctx, `SELECT session_id, any(tenant), count(), sum(`+correctedCost+`) AS cost, max(ts)
		FROM usage_events FINAL`+correctedJoin+` WHERE ts >= ? GROUP BY session_id ORDER BY cost DESC, max(ts) DESC LIMIT ?`,
		in.from(), in.from(), insightRows)
	if err != nil {
		return fmt.Errorf("insights: sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s SessionInsight
		var nano uint64
		var last time.Time
		if err := rows.Scan(&s.SessionID, &s.Tenant, &s.Calls, &nano, &last); err != nil {
			return fmt.Errorf("insights: sessions: %w", err)
		}
		s.CostUSD, s.Last = insightUSD(nano), last.UTC().Format(time.DateTime)
		in.Sessions = append(in.Sessions, s)
	}
	return rows.Err()
}

func insightErrors(ctx context.Context, st *store, in *Insights) error {
	rows, err := st.conn.Query(ctx, `SELECT class, n, msg FROM (
		SELECT if(error_class = '', 'unknown', error_class) AS class, count() AS n,
			argMaxIf(error_message, ts, error_message != '') AS msg
			FROM usage_events FINAL WHERE ts >= ? AND status != 'ok' GROUP BY class
		UNION ALL
		SELECT concat('tool:', status) AS class, count() AS n, '' AS msg
			FROM tool_events FINAL WHERE ts >= ? AND status != 'ok' GROUP BY class
	) ORDER BY n DESC, class LIMIT ?`, in.from(), in.from(), insightRows)
	if err != nil {
		return fmt.Errorf("insights: errors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e ErrorInsight
		if err := rows.Scan(&e.Class, &e.Count, &e.LastMessage); err != nil {
			return fmt.Errorf("insights: errors: %w", err)
		}
		in.Errors = append(in.Errors, e)
	}
	return rows.Err()
}

// WriteText prints the report as terminal tables.
func (in Insights) WriteText(w io.Writer) error {
	window := "all time"
	if in.Since != "" {
		window = "the last " + in.Since + " (since " + in.From.Format(time.DateTime) + " UTC)"
	}
	fmt.Fprintf(w, "Where time and money went, %s\n", window)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	section(tw, "\nTop models", "MODEL\tCALLS\tERRORS\tTOKENS IN\tTOKENS OUT\tCOST USD\tMEAN LATENCY\tUNPRICED", len(in.Models))
	for _, m := range in.Models {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%.0f ms\t%d\n", m.Model, m.Calls, m.Errors, m.InputTokens, m.OutputTokens,
			costCell(uint64(math.Round(m.CostUSD*1e9)), m.UnpricedCalls), m.MeanLatencyMs, m.UnpricedCalls)
	}
	section(tw, "\nTools", "TOOL\tRUNS\tFAILURES\tMEAN LATENCY\tP95 LATENCY", len(in.Tools))
	for _, t := range in.Tools {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f ms\t%.0f ms\n", t.Tool, t.Runs, t.Failures, t.MeanLatencyMs, t.P95LatencyMs)
	}
	section(tw, "\nSessions by cost", "SESSION\tTENANT\tCALLS\tCOST USD\tLAST CALL (UTC)", len(in.Sessions))
	for _, s := range in.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.6f\t%s\n", s.SessionID, s.Tenant, s.Calls, s.CostUSD, s.Last)
	}
	section(tw, "\nErrors", "CLASS\tCOUNT\tLAST MESSAGE", len(in.Errors))
	for _, e := range in.Errors {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", e.Class, e.Count, oneLine(e.LastMessage, 100))
	}
	return tw.Flush()
}

func section(w io.Writer, title, header string, n int) {
	fmt.Fprintln(w, title)
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	fmt.Fprintln(w, header)
}

// insightUSD converts nano-USD (kept apart from cost.go's helpers, which
// change with the cost queries).
func insightUSD(nano uint64) float64 { return float64(nano) / 1e9 }

// oneLine is s on one line, cut to n characters for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
