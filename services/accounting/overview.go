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
	// ToolCosts are run time, result size and context cost per tool.
	ToolCosts []ToolCostRow `json:"tool_costs"`
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
	Search string        // sessions page: part of a session id
	// Month shows one calendar month in UTC (?month=2026-11) instead of a range.
	Month string
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

// overview runs the panels' queries at once: one over the hourly roll-up
// broken down by time bucket, model, tenant, purpose and provider (a few
// thousand rows, added up here for every panel but two), the top sessions
// from the per-session roll-up, and tool latency from tool_events.
func (s *store) overview(ctx context.Context, q overviewQuery, now time.Time) (Overview, error) {
	f := usageFilter{Since: q.Since, Tenant: q.Tenant}
	if q.Month != "" {
		f.From, f.To, _ = MonthRange(q.Month) // overviewQueryFrom checked it
	}
	plan := planUsage(f, now)
	ov := Overview{Tenant: q.Tenant, Range: q.Range, From: plan.from}
	var c cube
	err := parallel(
		func() (err error) { c, err = s.usageCube(ctx, plan, q.Since); return err },
		func() (err error) { ov.Sessions, err = s.groupUsage(ctx, plan, keyFor("session"), 10); return err },
		func() (err error) { ov.Tools, err = s.toolLatency(ctx, plan); return err },
		func() error {
			rep, err := s.toolCost(ctx, ToolCostQuery{Since: q.Since, Tenant: q.Tenant}, now)
			ov.ToolCosts = rep.Rows
			return err
		},
	)
	if err != nil {
		return ov, err
	}
	ov.Models, ov.Tenants, ov.Purposes = c.models.sorted(0), c.tenants.sorted(10), c.purposes.sorted(0)
	if err := s.addUnpriced(ctx, plan, keyFor("model"), ov.Models); err != nil {
		return ov, err
	}
	ov.Total = totalOf(ov.Models)
	ov.Providers = providerHealth(c.providers.sorted(0))
	ov.Spend = c.series()
	return ov, nil
}

// cube is usage broken down every way the overview shows it.
type cube struct {
	grain                                string
	step                                 int64
	models, tenants, purposes, providers costRows
	cost                                 map[string]map[int64]uint64 // model → bucket start → nano USD
	starts                               map[int64]bool
}

// costRows adds CostRows up by key.
type costRows map[string]*CostRow

func (m costRows) add(key string, r CostRow) {
	if m[key] == nil {
		m[key] = &CostRow{Key: key}
	}
	m[key].add(r)
}

// sorted lists the rows most expensive first (then by key), at most limit
// of them when limit > 0, as groupUsage orders them.
func (m costRows) sorted(limit int) []CostRow {
	out := make([]CostRow, 0, len(m))
	for _, r := range m {
		r.CostUSD = nanoToUSD(r.CostNanoUSD)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CostNanoUSD != out[j].CostNanoUSD {
			return out[i].CostNanoUSD > out[j].CostNanoUSD
		}
		return out[i].Key < out[j].Key
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// cubeSep separates the parts of a cube key; it does not occur in names.
const cubeSep = "\x1F"

// usageCube buckets by hour for windows up to two days, else by day.
func (s *store) usageCube(ctx context.Context, plan usagePlan, since time.Duration) (cube, error) {
	c := cube{grain: "day", step: 86400, models: costRows{}, tenants: costRows{}, purposes: costRows{},
		providers: costRows{}, cost: map[string]map[int64]uint64{}, starts: map[int64]bool{}}
	bucket := "intDiv(toUInt32(hour), 86400) * 86400"
	if since > 0 && since <= 48*time.Hour {
		c.grain, c.step, bucket = "hour", 3600, "toUInt32(hour)"
	}
	sep := "'" + cubeSep + "'"
	key := "concat(toString(" + bucket + "), " + sep + ", model, " + sep + ", tenant, " + sep + ", purpose, " + sep + ", provider)"
	rows, err := s.groupUsage(ctx, plan, groupKey{expr: key}, 0)
	if err != nil {
		return c, err
	}
	for _, r := range rows {
		parts := strings.Split(r.Key, cubeSep)
		if len(parts) != 5 {
			continue
		}
		at, _ := strconv.ParseInt(parts[0], 10, 64)
		model := parts[1]
		c.models.add(model, r)
		c.tenants.add(parts[2], r)
		c.purposes.add(parts[3], r)
		c.providers.add(parts[4], r)
		if c.cost[model] == nil {
			c.cost[model] = map[int64]uint64{}
		}
		c.cost[model][at] += r.CostNanoUSD
		c.starts[at] = true
	}
	return c, nil
}

func (c cube) series() SpendSeries {
	fillGaps(c.starts, c.step)
	return buildSeries(c.grain, c.cost, c.starts)
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
	if !plan.to.IsZero() {
		where, args = where+" AND ts < toDateTime(?)", append(args, uint32(plan.to.Unix()))
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
