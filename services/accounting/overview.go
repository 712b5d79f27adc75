package accounting

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Overview is everything the dashboard's main page shows, for one tenant
// (or all) over one time range. It is also served as JSON.
type Overview struct {
	Tenant    string           `json:"tenant,omitempty"`
	Range     string           `json:"range"`
	From      time.Time        `json:"from,omitzero"`
	Total     CostRow          `json:"total"`
	Spend     SpendSeries      `json:"spend_over_time"`
	Sessions  []CostRow        `json:"top_sessions"`
	Tenants   []CostRow        `json:"top_tenants"`
	Purposes  []CostRow        `json:"by_purpose"`
	Models    []CostRow        `json:"by_model"`
	Providers []ProviderHealth `json:"providers"`
	Tools     []ToolLatency    `json:"tools"`
}

// SpendSeries is cost per model per time bucket (an hour or a day).
type SpendSeries struct {
	Bucket   string      `json:"bucket"` // hour or day
	Starts   []time.Time `json:"starts"`
	Models   []string    `json:"models"`
	CostNano [][]uint64  `json:"cost_nano_usd"` // [model][bucket]
}

// ProviderHealth is how often a provider's calls failed.
type ProviderHealth struct {
	Provider  string  `json:"provider"`
	Calls     uint64  `json:"calls"`
	Errors    uint64  `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	MeanMs    float64 `json:"mean_latency_ms"`
}

// ToolLatency is how long a tool's executions took.
type ToolLatency struct {
	Tool   string  `json:"tool"`
	Calls  uint64  `json:"calls"`
	Errors uint64  `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	MaxMs  uint64  `json:"max_ms"`
}

// overviewQuery selects the dashboard's data.
type overviewQuery struct {
	Tenant string
	Range  string        // as shown: 1h, 24h, 7d, 30d, all
	Since  time.Duration // 0: all time
}

// parseRange reads 1h, 24h, 7d, 30d (Go durations plus a d suffix) or all.
func parseRange(s string) (string, time.Duration, error) {
	switch s {
	case "", "24h":
		return "24h", 24 * time.Hour, nil
	case "all":
		return "all", 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return "", 0, fmt.Errorf("%w: range %q", ErrBadQuery, s)
		}
		return s, time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return "", 0, fmt.Errorf("%w: range %q: want e.g. 1h, 24h, 7d or all", ErrBadQuery, s)
	}
	return s, d, nil
}

// overview runs the panels' queries at once; each reads a roll-up (tool
// latency reads raw tool_events, tenant and time first in its sort key).
func (s *store) overview(ctx context.Context, q overviewQuery, now time.Time) (Overview, error) {
	plan := planUsage(usageFilter{Since: q.Since, Tenant: q.Tenant}, now)
	ov := Overview{Tenant: q.Tenant, Range: q.Range, From: plan.from}
	var providers []CostRow
	group := func(by string, limit int, out *[]CostRow) func() error {
		return func() (err error) {
			*out, err = s.groupUsage(ctx, plan, keyFor(by), limit)
			return err
		}
	}
	err := parallel(
		group("model", 0, &ov.Models),
		group("session", 10, &ov.Sessions),
		group("tenant", 10, &ov.Tenants),
		group("purpose", 0, &ov.Purposes),
		group("provider", 0, &providers),
		func() (err error) { ov.Spend, err = s.spendSeries(ctx, plan, q.Since); return err },
		func() (err error) { ov.Tools, err = s.toolLatency(ctx, plan); return err },
	)
	ov.Total = totalOf(ov.Models)
	ov.Providers = providerHealth(providers)
	return ov, err
}

// parallel runs fs at once and returns the first of their errors.
func parallel(fs ...func() error) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// spendSeries buckets cost by hour for windows up to two days, else by day.
func (s *store) spendSeries(ctx context.Context, plan usagePlan, since time.Duration) (SpendSeries, error) {
	grain, bucket := "day", "intDiv(toUInt32(hour), 86400) * 86400"
	if since > 0 && since <= 48*time.Hour {
		grain, bucket = "hour", "toUInt32(hour)"
	}
	rows, err := s.groupUsage(ctx, plan, groupKey{expr: "concat(toString(" + bucket + "), '|', model)"}, 0)
	if err != nil {
		return SpendSeries{}, err
	}
	cost := map[string]map[int64]uint64{}
	starts := map[int64]bool{}
	for _, r := range rows {
		sec, model, _ := strings.Cut(r.Key, "|")
		at, _ := strconv.ParseInt(sec, 10, 64)
		if cost[model] == nil {
			cost[model] = map[int64]uint64{}
		}
		cost[model][at] += r.CostNanoUSD
		starts[at] = true
	}
	step := int64(86400)
	if grain == "hour" {
		step = 3600
	}
	fillGaps(starts, step)
	return buildSeries(grain, cost, starts), nil
}

// maxBuckets bounds the chart; longer spans keep only the buckets with data.
const maxBuckets = 750

// fillGaps adds the empty buckets between the first and last, so time on
// the chart's axis runs evenly.
func fillGaps(starts map[int64]bool, step int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for at := range starts {
		lo, hi = min(lo, at), max(hi, at)
	}
	if len(starts) == 0 || (hi-lo)/step > maxBuckets {
		return
	}
	for at := lo; at <= hi; at += step {
		starts[at] = true
	}
}

func buildSeries(grain string, cost map[string]map[int64]uint64, starts map[int64]bool) SpendSeries {
	ser := SpendSeries{Bucket: grain, Starts: []time.Time{}, Models: []string{}, CostNano: [][]uint64{}}
	var ats []int64
	for at := range starts {
		ats = append(ats, at)
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i] < ats[j] })
	for _, at := range ats {
		ser.Starts = append(ser.Starts, time.Unix(at, 0).UTC())
	}
	for m := range cost {
		ser.Models = append(ser.Models, m)
	}
	sort.Strings(ser.Models)
	for _, m := range ser.Models {
		line := make([]uint64, len(ats))
		for i, at := range ats {
			line[i] = cost[m][at]
		}
		ser.CostNano = append(ser.CostNano, line)
	}
	return ser
}

func providerHealth(rows []CostRow) []ProviderHealth {
	out := make([]ProviderHealth, 0, len(rows))
	for _, r := range rows {
		p := ProviderHealth{Provider: r.Key, Calls: r.Calls, Errors: r.Errors}
		if r.Calls > 0 {
			p.ErrorRate = float64(r.Errors) / float64(r.Calls)
			p.MeanMs = float64(r.LatencyMs) / float64(r.Calls)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ErrorRate > out[j].ErrorRate })
	return out
}

// toolLatency reads raw tool_events (tenant and time first in its sort key,
// so the window's rows are a range scan).
func (s *store) toolLatency(ctx context.Context, plan usagePlan) ([]ToolLatency, error) {
	where, args := " WHERE 1", []any{}
	if !plan.from.IsZero() {
		where, args = where+" AND ts >= toDateTime(?)", append(args, uint32(plan.from.Unix()))
	}
	if plan.filter.Tenant != "" {
		where, args = where+" AND tenant = ?", append(args, plan.filter.Tenant)
	}
	rows, err := s.conn.Query(ctx, "SELECT tool, count(), countIf(status != 'ok'), toFloat64(quantile(0.5)(duration_ms)), "+
		"toFloat64(quantile(0.95)(duration_ms)), max(duration_ms) FROM tool_events"+where+
		" GROUP BY tool ORDER BY count() DESC, tool LIMIT 50", args...)
	if err != nil {
		return nil, s.queryError(err)
	}
	defer rows.Close()
	out := []ToolLatency{}
	for rows.Next() {
		var t ToolLatency
		var maxMs uint32
		if err := rows.Scan(&t.Tool, &t.Calls, &t.Errors, &t.P50Ms, &t.P95Ms, &maxMs); err != nil {
			return nil, err
		}
		t.MaxMs = uint64(maxMs)
		out = append(out, t)
	}
	return out, s.queryError(rows.Err())
}
