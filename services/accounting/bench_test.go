package accounting

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// benchEvents is how many events one ingest round drains
// (HERALD_BENCH_EVENTS overrides).
func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("HERALD_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// BenchmarkSinkIngest measures events/s from a backlog in the USAGE stream
// into ClickHouse (stored, acked), through the real sink.
//
//	go test -run '^$' -bench SinkIngest -benchtime 1x ./services/accounting/
func BenchmarkSinkIngest(b *testing.B) {
	n := benchEvents()
	for i := 0; i < b.N; i++ {
		bb := heraldtest.StartBus(b)
		dsn := testDSN(b)
		publishBacklog(b, bb.JS, n, i)
		cpu0 := processCPU()
		start := time.Now()
		startService(b, bb, Config{DSN: dsn, BatchSize: benchBatch()})
		require.Eventually(b, func() bool { return streamMessages(b, bb.JS, bus.StreamUsage) == 0 }, 10*time.Minute, 10*time.Millisecond)
		elapsed := time.Since(start)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		// CPU of this process (the sink and the embedded NATS server) per
		// event: a figure the machine's other load does not inflate much.
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(n), "cpu-µs/event")
		require.Equal(b, uint64(n), scalar(b, dsn, "SELECT count() FROM usage_events"))
		if cons, err := bb.JS.Consumer(context.Background(), bus.StreamUsage, usageKind.durable); err == nil {
			info, _ := cons.Info(context.Background())
			b.Logf("drained %d events in %s; deliveries %d (%d redelivered)", n, elapsed.Round(time.Millisecond),
				info.Delivered.Consumer, info.NumRedelivered)
		}
	}
}

// publishBacklog stores n distinct usage events with async publishes.
func publishBacklog(b *testing.B, js jetstream.JetStream, n, round int) {
	b.Helper()
	now := time.Now()
	for start := 0; start < n; start += 10_000 {
		for i := start; i < min(n, start+10_000); i++ {
			e := usageEvent(fmt.Sprintf("bench-%d-%d", round, i), fmt.Sprintf("tenant-%d", i%20),
				fmt.Sprintf("session-%d", i/40), []string{"gpt-4o", "gpt-4o-mini", "claude-sonnet"}[i%3],
				now.Add(-time.Duration(i)*time.Second), 1200, 300, 4_500_000)
			data, err := proto.Marshal(e)
			require.NoError(b, err)
			_, err = js.PublishAsync(bus.UsageSubject(e.Tenant), data, jetstream.WithMsgID(e.EventId))
			require.NoError(b, err)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			b.Fatal("publishing the backlog stalled")
		}
	}
}

// BenchmarkCostQuery measures `herald cost` query latency over many usage
// events (HERALD_BENCH_ROWS, default 1M; docs use 10M), through the roll-ups
// and, for comparison, over raw rows. Rows are generated inside ClickHouse
// (INSERT ... SELECT), which fills the roll-ups exactly as the sink does.
//
//	HERALD_BENCH_ROWS=10000000 go test -run '^$' -bench CostQuery -benchtime 1x ./services/accounting/
func BenchmarkCostQuery(b *testing.B) {
	rows := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("HERALD_BENCH_ROWS")); err == nil && n > 0 {
		rows = n
	}
	dsn := testDSN(b)
	ctx := context.Background()
	_, err := Migrate(ctx, dsn)
	require.NoError(b, err)
	st, err := openExisting(ctx, dsn)
	require.NoError(b, err)
	defer st.Close()
	generateUsageRows(b, st, rows)
	settleMerges(b, st)
	now := time.Now()

	type benchQuery struct {
		CostQuery
		alignedNow bool
	}
	queries := []struct {
		name string
		q    benchQuery
	}{
		{"by-model-all", benchQuery{CostQuery: CostQuery{By: "model"}}},
		{"by-day-30d", benchQuery{CostQuery: CostQuery{By: "day", Since: 30 * 24 * time.Hour}}},
		{"by-tenant-24h", benchQuery{CostQuery: CostQuery{By: "tenant", Since: 24 * time.Hour}}},
		{"by-tenant-24h-hourly", benchQuery{CostQuery: CostQuery{By: "tenant", Since: 24 * time.Hour}, alignedNow: true}},
		{"by-purpose-7d-tenant", benchQuery{CostQuery: CostQuery{By: "purpose", Since: 7 * 24 * time.Hour, Tenant: "tenant-3"}}},
		{"by-session-24h", benchQuery{CostQuery: CostQuery{By: "session", Since: 24 * time.Hour}}},
		{"one-session", benchQuery{CostQuery: CostQuery{By: "model", Session: fmt.Sprintf("session-%d", rows/80-rows/80%10+8)}}},
	}
	for i := 0; i < b.N; i++ {
		for _, tc := range queries {
			at := now
			if tc.q.alignedNow {
				at = now.Truncate(time.Hour) // no partial hour: roll-up only
			}
			rollup := latencies(b, 30, func() { _, err := st.queryCost(ctx, tc.q.CostQuery, at); require.NoError(b, err) })
			raw := latencies(b, 5, func() { rawQuery(b, st, tc.q.CostQuery, at) })
			b.Logf("%-22s roll-up p50 %6.1f ms p95 %6.1f ms | raw p50 %7.1f ms p95 %7.1f ms",
				tc.name, rollup[0], rollup[1], raw[0], raw[1])
			b.ReportMetric(rollup[1], tc.name+"-p95-ms")
		}
		ov := latencies(b, 20, func() {
			_, err := st.overview(ctx, overviewQuery{Range: "24h", Since: 24 * time.Hour}, now)
			require.NoError(b, err)
		})
		b.Logf("%-22s p50 %6.1f ms p95 %6.1f ms", "dashboard-overview-24h", ov[0], ov[1])
	}
}

// generateUsageRows inserts n rows over the last 30 days, shaped like real
// traffic: sessions of 40 consecutive calls (a few minutes), each session of
// one of 50 tenants and mostly one of 4 models; every tenth call a
// compression on a small model, every twentieth a subagent, 5% errors;
// every tenth session a delegated child of the one before (same tenant).
func generateUsageRows(b *testing.B, st *store, n int) {
	b.Helper()
	start := time.Now()
	const chunk = 2_000_000
	for done := 0; done < n; done += chunk {
		size := min(chunk, n-done)
		q := fmt.Sprintf(`INSERT INTO usage_events (event_id, ts, tenant, session_id, parent_session_id, task_id, purpose,
			provider, model, api_mode, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
			cost_nano_usd, price_source, latency_ms, status, error_class, attempt, is_fallback)
		SELECT concat('gen-', toString(number)), toDateTime(toUInt32(now()) - intDiv((%[1]d - number) * 2592000, %[1]d)),
			concat('tenant-', toString(intDiv(number, 80) %% 50)), concat('session-', toString(intDiv(number, 40))),
			if(intDiv(number, 40) %% 10 = 9, concat('session-', toString(intDiv(number, 40) - 1)), ''), '',
			multiIf(number %% 10 = 0, 'compression', number %% 20 = 1, 'subagent', 'agent') AS purpose,
			if(intDiv(number, 40) %% 4 = 2, 'anthropic', 'openai'),
			if(purpose = 'compression', 'gpt-4o-mini', ['gpt-4o', 'gpt-4o-mini', 'claude-sonnet', 'o3'][intDiv(number, 40) %% 4 + 1]),
			'chat_completions', 1000 + number %% 500, 200 + number %% 100, number %% 300, 0, 0, 1000000 + number %% 7777,
			'builtin', toUInt32(100 + number %% 900), if(number %% 20 = 7, 'error', 'ok'), '', 1, 0
		FROM numbers(%[2]d, %[3]d)`, n, done, size)
		require.NoError(b, st.conn.Exec(context.Background(), q))
	}
	b.Logf("generated %d usage rows in %s", n, time.Since(start).Round(time.Millisecond))
}

// settleMerges merges the generated parts as ClickHouse's background merges
// would after a while of steady ingest: a bulk INSERT ... SELECT leaves many
// parts that a day of 10k-row batches would not.
func settleMerges(b *testing.B, st *store) {
	b.Helper()
	start := time.Now()
	for _, t := range []string{"usage_events", "usage_hourly", "usage_by_session", "session_spans", "usage_event_ids", "session_roots"} {
		require.NoError(b, st.conn.Exec(context.Background(), "OPTIMIZE TABLE "+t+" FINAL"))
	}
	b.Logf("merged parts in %s", time.Since(start).Round(time.Millisecond))
}

// rawQuery answers q from usage_events alone (FINAL, as a raw query must to
// not double count), for comparison with the roll-ups.
func rawQuery(b *testing.B, st *store, q CostQuery, now time.Time) {
	key := map[string]string{"model": "model", "provider": "provider", "session": "session_id", "tenant": "tenant",
		"purpose": "purpose", "day": "toString(toDate(ts, 'UTC'))"}[q.By]
	final := " FINAL"
	if os.Getenv("HERALD_BENCH_RAW_FINAL") == "0" {
		final = ""
	}
	where, args := " WHERE 1", []any{}
	if q.Since > 0 {
		where, args = where+" AND ts >= toDateTime(?)", append(args, uint32(now.Add(-q.Since).Unix()))
	}
	if q.Tenant != "" {
		where, args = where+" AND tenant = ?", append(args, q.Tenant)
	}
	if q.Session != "" {
		where, args = where+" AND (session_id = ? OR parent_session_id = ?)", append(args, q.Session, q.Session)
	}
	if q.By == "session" {
		key = "if(parent_session_id = '', session_id, parent_session_id)"
	}
	rows, err := st.conn.Query(context.Background(), "SELECT "+key+" AS k, count(), sum(input_tokens), sum(output_tokens), "+
		"sum(cache_read_tokens), sum(cache_write_tokens), sum(reasoning_tokens), sum(cost_nano_usd) FROM usage_events"+final+
		where+" GROUP BY k ORDER BY sum(cost_nano_usd) DESC", args...)
	require.NoError(b, err)
	for rows.Next() {
	}
	require.NoError(b, rows.Err())
	rows.Close()
}

// latencies runs f n times and returns p50 and p95 in milliseconds.
func latencies(b *testing.B, n int, f func()) [2]float64 {
	ds := make([]float64, n)
	for i := range ds {
		t0 := time.Now()
		f()
		ds[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	sort.Float64s(ds)
	return [2]float64{ds[n/2], ds[min(n-1, n*95/100)]}
}

func benchBatch() int {
	if n, err := strconv.Atoi(os.Getenv("HERALD_BENCH_BATCH")); err == nil && n > 0 {
		return n
	}
	return 0
}

// processCPU is the user+system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
