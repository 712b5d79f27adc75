package accounting

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// testServerDSN is the ClickHouse every test of this binary shares (one
// fresh database per test): HERALD_TEST_CLICKHOUSE_DSN or a private server.
var testServerDSN string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildSink())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	testServerDSN = os.Getenv(TestDSNEnv)
	if testServerDSN == "" {
		dir, err := os.MkdirTemp("", "herald-accounting-ch-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		local, err := StartLocalClickHouse(ctx, dir, zerolog.Nop())
		if err != nil {
			fmt.Fprintln(os.Stderr, "accounting tests need ClickHouse:", err)
			return 1
		}
		defer local.Stop()
		testServerDSN = local.DSN()
	}
	return m.Run()
}

// testDSN returns a DSN naming a fresh database, dropped after the test.
func testDSN(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dsn, drop, err := FreshDatabase(ctx, testServerDSN)
	require.NoError(t, err)
	t.Cleanup(drop)
	return dsn
}

// testConfig is a fast-flushing config for dsn.
func testConfig(dsn string) Config {
	cfg := DefaultConfig()
	cfg.DSN = dsn
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.RetryMin = 50 * time.Millisecond
	cfg.RetryMax = 500 * time.Millisecond
	return cfg
}

// startService starts accounting on its own connection to b (as its own
// process would) and shuts it down with the test.
func startService(t testing.TB, b *heraldtest.Bus, cfg Config) *Service {
	t.Helper()
	nc, js := b.Connect(t, "accounting")
	s, err := New(cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// usageEvent is a plausible event of the gateway.
func usageEvent(id, tenant, session, model string, ts time.Time, in, out int64, costNano uint64) *heraldpb.UsageEvent {
	return &heraldpb.UsageEvent{
		EventId: id, TsUnixMs: ts.UnixMilli(), Tenant: tenant, SessionId: session, TaskId: "task-" + session,
		Purpose: "agent", Provider: "openai", Model: model, ApiMode: "chat_completions",
		Usage:       &heraldpb.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: in / 2, CacheWriteTokens: 3, ReasoningTokens: out / 4},
		CostNanoUsd: costNano, PriceSource: "builtin", LatencyMs: 120, Status: "ok", Attempt: 1,
	}
}

// publishUsage publishes events as the gateway does (Nats-Msg-Id = event id
// plus a suffix, so a test can publish one event id twice on purpose).
func publishUsage(t testing.TB, js jetstream.JetStream, msgIDSuffix string, evs ...*heraldpb.UsageEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, e := range evs {
		require.NoError(t, bus.PublishProto(ctx, js, bus.UsageSubject(e.Tenant), e.EventId+msgIDSuffix, e))
	}
}

// scalar runs a one-number query against dsn.
func scalar(t testing.TB, dsn, query string, args ...any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := openExisting(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	var n uint64
	require.NoError(t, st.conn.QueryRow(ctx, query, args...).Scan(&n))
	return n
}

// streamMessages is how many messages wait in stream.
func streamMessages(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := bus.PendingWork(ctx, js, stream)
	require.NoError(t, err)
	return n
}

// waitDrained waits until every event published on stream has been stored
// and acked: acked events leave the work-queue stream.
func waitDrained(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	require.Eventually(t, func() bool { return streamMessages(t, js, stream) == 0 }, 20*time.Second, 20*time.Millisecond)
}
