package accounting

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestUsageEventsLandInClickHouseWithTheirColumns(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	startService(t, b, testConfig(dsn))

	ts := time.Date(2026, 11, 28, 10, 15, 30, 0, time.UTC)
	ev := usageEvent("req-1:1", "acme", "s1", "gpt-4o-mini", ts, 1000, 200, 1_234_567)
	ev.IsFallback, ev.ParentSessionId, ev.Purpose = true, "parent-1", "compression"
	publishUsage(t, b.JS, "", ev)

	waitDrained(t, b.JS, bus.StreamUsage)
	st, err := openExisting(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	var (
		id, tenant, session, parent, purpose, model, mode string
		gotTS                                             time.Time
		in, out, cr, cw, reasoning, cost                  uint64
		fallback                                          uint8
	)
	require.NoError(t, st.conn.QueryRow(context.Background(),
		"SELECT event_id, ts, tenant, session_id, parent_session_id, purpose, model, api_mode, input_tokens, output_tokens, "+
			"cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_nano_usd, is_fallback FROM usage_events").
		Scan(&id, &gotTS, &tenant, &session, &parent, &purpose, &model, &mode, &in, &out, &cr, &cw, &reasoning, &cost, &fallback))
	require.Equal(t, "req-1:1", id)
	require.True(t, ts.Equal(gotTS), "ts %s", gotTS)
	require.Equal(t, []string{"acme", "s1", "parent-1", "compression", "gpt-4o-mini", "chat_completions"},
		[]string{tenant, session, parent, purpose, model, mode})
	require.Equal(t, []uint64{1000, 200, 500, 3, 50, 1_234_567}, []uint64{in, out, cr, cw, reasoning, cost})
	require.Equal(t, uint8(1), fallback)

	rep, err := QueryCost(context.Background(), dsn, CostQuery{By: "model"})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 1)
	require.Equal(t, "gpt-4o-mini", rep.Rows[0].Key)
	require.Equal(t, uint64(1_234_567), rep.Total.CostNanoUSD)
	require.InDelta(t, 0.001234567, rep.Total.CostUSD, 1e-12)
}

func TestToolEventsLandInClickHouse(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	startService(t, b, testConfig(dsn))

	ctx := context.Background()
	for i := range 3 {
		ev := &heraldpb.ToolEvent{EventId: fmt.Sprintf("call-%d", i), TsUnixMs: time.Now().UnixMilli(), Tenant: "acme",
			SessionId: "s1", CallId: fmt.Sprintf("call-%d", i), Tool: "terminal", Runner: "r1", DurationMs: 40, Status: "ok", OutputBytes: 12}
		require.NoError(t, bus.PublishProto(ctx, b.JS, bus.ToolEventSubject("acme"), ev.EventId, ev))
	}
	waitDrained(t, b.JS, bus.StreamToolEvents)
	require.Equal(t, uint64(3), scalar(t, dsn, "SELECT count() FROM tool_events WHERE tool = 'terminal' AND duration_ms = 40"))
}

func TestRedeliveredAndDuplicateEventsAreCountedOnce(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	startService(t, b, testConfig(dsn))

	now := time.Now()
	var evs []*heraldpb.UsageEvent
	for i := range 50 {
		evs = append(evs, usageEvent(fmt.Sprintf("e-%d", i), "acme", "s1", "m", now, 10, 5, 1000))
	}
	publishUsage(t, b.JS, "", evs...)
	waitDrained(t, b.JS, bus.StreamUsage)
	// The same events again, as a publisher retrying after the bus's
	// duplicate window would send them, and twice within one batch.
	publishUsage(t, b.JS, ":again", evs...)
	publishUsage(t, b.JS, ":third", evs[:10]...)
	waitDrained(t, b.JS, bus.StreamUsage)

	rep, err := QueryCost(context.Background(), dsn, CostQuery{By: "session"})
	require.NoError(t, err)
	require.Equal(t, uint64(50), rep.Total.Calls)
	require.Equal(t, uint64(50_000), rep.Total.CostNanoUSD)
	require.Equal(t, uint64(50), scalar(t, dsn, "SELECT count() FROM usage_events"), "raw rows are stored once too")
	require.Equal(t, uint64(50), scalar(t, dsn, "SELECT sum(calls) FROM usage_hourly"), "the roll-up counts each event once")
}

func TestMalformedUsageIsDeadLetteredAndTheSinkKeepsGoing(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	startService(t, b, testConfig(dsn))

	ctx := context.Background()
	require.NoError(t, bus.Publish(ctx, b.JS, bus.UsageSubject("acme"), "junk", []byte("\xff\xff not protobuf")))
	require.NoError(t, bus.PublishProto(ctx, b.JS, bus.UsageSubject("acme"), "noid", &heraldpb.UsageEvent{Model: "m"}))
	publishUsage(t, b.JS, "", usageEvent("far-future", "acme", "s1", "m", time.Unix(1<<33, 0), 1, 1, 7))
	publishUsage(t, b.JS, "", usageEvent("good", "acme", "s1", "m", time.Now(), 1, 1, 7))

	require.Eventually(t, func() bool { return len(heraldtest.DeadLetters(t, b.JS, bus.StreamUsage)) == 3 },
		10*time.Second, 20*time.Millisecond)
	var reasons []string
	for _, dl := range heraldtest.DeadLetters(t, b.JS, bus.StreamUsage) {
		reasons = append(reasons, dl.Header.Get(bus.HeaderError))
		require.True(t, strings.HasPrefix(dl.Header.Get(bus.HeaderSubject), "herald.usage."))
	}
	require.Contains(t, reasons[0], "malformed")
	require.Contains(t, reasons[1], "no event_id")
	require.Contains(t, reasons[2], "past what ClickHouse's DateTime holds")
	waitDrained(t, b.JS, bus.StreamUsage)
	require.Equal(t, uint64(1), scalar(t, dsn, "SELECT count() FROM usage_events WHERE event_id = 'good'"))
}
