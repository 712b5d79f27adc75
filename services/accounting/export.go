package accounting

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ExportGroupings are the groupings `herald cost export` offers.
var ExportGroupings = []string{"session", "day", "model"}

// ExportQuery is one tenant's month, grouped for a bill.
type ExportQuery struct {
	Tenant string
	Month  string // 2026-11
	By     string // session (default), day or model
}

// Export is the tenant's usage of the month by q.By: the same rows and
// total as `herald cost --tenant T --month M --by B` (subagents under their
// parent session, compression summaries in, price corrections applied).
func Export(ctx context.Context, dsn string, q ExportQuery) (CostReport, error) {
	if q.Tenant == "" || q.Month == "" {
		return CostReport{}, fmt.Errorf("%w: an export is one tenant's month: --tenant and --month are required", ErrBadQuery)
	}
	if q.By == "" {
		q.By = "session"
	}
	ok := false
	for _, g := range ExportGroupings {
		ok = ok || q.By == g
	}
	if !ok {
		return CostReport{}, fmt.Errorf("%w: --by %q: want one of %s", ErrBadQuery, q.By, strings.Join(ExportGroupings, ", "))
	}
	return QueryCost(ctx, dsn, CostQuery{By: q.By, Tenant: q.Tenant, Month: q.Month})
}

// exactUSD is nano-USD as a decimal with nine places, exact.
func exactUSD(nano uint64) string {
	return fmt.Sprintf("%d.%09d", nano/1e9, nano%1e9)
}

// WriteCSV prints the report's rows as CSV: a header naming the key column
// (session, day or model), then one row per key; the rows add up to the
// total exactly (cost_usd has nine decimals: it is cost_nano_usd).
func (r CostReport) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{r.By, "calls", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
		"reasoning_tokens", "cost_usd", "cost_nano_usd", "unpriced_calls"})
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	for _, row := range r.Rows {
		_ = cw.Write([]string{row.Key, u(row.Calls), u(row.Errors), u(row.InputTokens), u(row.OutputTokens), u(row.CacheReadTokens),
			u(row.CacheWriteTokens), u(row.ReasoningTokens), exactUSD(row.CostNanoUSD), u(row.CostNanoUSD), u(row.UnpricedCalls)})
	}
	cw.Flush()
	return cw.Error()
}
