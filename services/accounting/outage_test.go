package accounting

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// privateClickHouse starts a server this test alone may stop and restart.
func privateClickHouse(t *testing.T) *LocalClickHouse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := StartLocalClickHouse(ctx, t.TempDir(), heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	return l
}

func manyEvents(prefix string, n int) []*heraldpb.UsageEvent {
	evs := make([]*heraldpb.UsageEvent, n)
	for i := range evs {
		evs[i] = usageEvent(fmt.Sprintf("%s-%d", prefix, i), "acme", "s1", "m", time.Now(), 10, 2, 100)
	}
	return evs
}

func TestEventsWaitWhileClickHouseIsDownAndArriveWhenItReturns(t *testing.T) {
	ch := privateClickHouse(t)
	b := heraldtest.StartBus(t)
	startService(t, b, testConfig(ch.DSN()))
	publishUsage(t, b.JS, "", manyEvents("before", 20)...)
	waitDrained(t, b.JS, bus.StreamUsage)

	ch.Stop()
	publishUsage(t, b.JS, "", manyEvents("during", 30)...)
	_, err := QueryCost(context.Background(), ch.DSN(), CostQuery{})
	require.ErrorIs(t, err, ErrUnreachable, "herald cost says ClickHouse is away")
	require.Equal(t, uint64(30), streamMessages(t, b.JS, bus.StreamUsage), "events wait in the stream")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, ch.Restart(ctx))
	waitDrained(t, b.JS, bus.StreamUsage)
	rep, err := QueryCost(context.Background(), ch.DSN(), CostQuery{By: "tenant"})
	require.NoError(t, err)
	require.Equal(t, uint64(50), rep.Total.Calls)
	require.Equal(t, uint64(5000), rep.Total.CostNanoUSD)
}

func TestServiceStartsWithClickHouseDownAndCatchesUp(t *testing.T) {
	ch := privateClickHouse(t)
	ch.Stop()
	b := heraldtest.StartBus(t)
	publishUsage(t, b.JS, "", manyEvents("early", 25)...)
	startService(t, b, testConfig(ch.DSN()))
	require.Equal(t, uint64(25), streamMessages(t, b.JS, bus.StreamUsage))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, ch.Restart(ctx))
	waitDrained(t, b.JS, bus.StreamUsage)
	rep, err := QueryCost(context.Background(), ch.DSN(), CostQuery{})
	require.NoError(t, err)
	require.Equal(t, uint64(25), rep.Total.Calls)
}

func TestShutdownDuringAnOutageHandsEventsBackAtOnce(t *testing.T) {
	ch := privateClickHouse(t)
	b := heraldtest.StartBus(t)
	first := startService(t, b, testConfig(ch.DSN()))
	publishUsage(t, b.JS, "", manyEvents("warm", 5)...)
	waitDrained(t, b.JS, bus.StreamUsage)

	ch.Stop()
	publishUsage(t, b.JS, "", manyEvents("held", 40)...)
	cons, err := b.JS.Consumer(context.Background(), bus.StreamUsage, usageKind.durable)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 40
	}, 10*time.Second, 20*time.Millisecond, "the sink holds the batch while ClickHouse is away")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, first.Shutdown(ctx))
	require.NoError(t, ch.Restart(ctx))
	startService(t, b, testConfig(ch.DSN()))
	// Handed back (nak), not left for the 30 s ack wait to run out.
	require.Eventually(t, func() bool { return streamMessages(t, b.JS, bus.StreamUsage) == 0 },
		10*time.Second, 20*time.Millisecond)
	rep, err := QueryCost(context.Background(), ch.DSN(), CostQuery{})
	require.NoError(t, err)
	require.Equal(t, uint64(45), rep.Total.Calls)
}
