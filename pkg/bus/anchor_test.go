package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A worker anchors its work-queue stream: the anchor is stored with a time
// to live, never handed to the handler, and not counted as pending work.
func TestWorkerAnchorsItsStreamWithoutDeliveringTheAnchor(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	var handled atomic.Int32
	startWorker(t, b, func(ctx context.Context, msg jetstream.Msg) error {
		require.Equal(t, bus.TasksSubject, msg.Subject(), "only work reaches the handler")
		handled.Add(1)
		return nil
	})
	st, err := b.JS.Stream(ctx, bus.StreamTasks)
	require.NoError(t, err)
	var anchor *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		anchor, err = st.GetLastMsgForSubject(ctx, bus.AnchorSubject(bus.StreamTasks))
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "the worker published no anchor")
	require.Equal(t, bus.AnchorTTL.String(), anchor.Header.Get("Nats-TTL"), "the anchor expires on its own")

	for i := range 3 {
		_, err := b.JS.Publish(ctx, bus.TasksSubject, fmt.Appendf(nil, "task %d", i))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return handled.Load() == 3 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 5*time.Second, 5*time.Millisecond)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.NotZero(t, info.State.Msgs, "the anchor stays while no work waits")
}

// A stream declared without per-message TTLs (an older declaration) refuses
// the anchor; the worker still works.
func TestWorkerWithoutAnchorRightStillWorks(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	st, err := b.JS.Stream(ctx, bus.StreamTasks)
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	cfg.AllowMsgTTL = false
	_, err = b.JS.UpdateStream(ctx, cfg)
	if err != nil {
		// the server does not let TTLs be turned off again: recreate it without
		require.NoError(t, b.JS.DeleteStream(ctx, bus.StreamTasks))
		_, err = b.JS.CreateStream(ctx, cfg)
		require.NoError(t, err)
	}
	var handled atomic.Int32
	startWorker(t, b, func(context.Context, jetstream.Msg) error { handled.Add(1); return nil })
	_, err = b.JS.Publish(ctx, bus.TasksSubject, []byte("task"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return handled.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	_, err = b.JS.Publish(ctx, bus.AnchorSubject(bus.StreamTasks), nil, jetstream.WithMsgTTL(time.Minute))
	require.Error(t, err, "this stream takes no anchor")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWorkQueueCycle: CPU (user + system, this process: client and
// embedded server) of one work item when nothing else waits — publish,
// pull, acknowledge, the way a session that runs alone uses a work queue —
// on a bare work-queue stream and on one that holds its anchor.
func BenchmarkWorkQueueCycle(b *testing.B) {
	for _, anchored := range []bool{false, true} {
		b.Run(map[bool]string{false: "bare", true: "anchored"}[anchored], func(b *testing.B) {
			bb := heraldtest.StartBus(b)
			ctx := context.Background()
			if anchored {
				_, err := bb.JS.Publish(ctx, bus.AnchorSubject(bus.StreamTasks), nil, jetstream.WithMsgTTL(time.Hour))
				require.NoError(b, err)
			}
			cons, err := bb.JS.CreateOrUpdateConsumer(ctx, bus.StreamTasks, jetstream.ConsumerConfig{Durable: "bench",
				FilterSubject: bus.TasksSubject, AckPolicy: jetstream.AckExplicitPolicy})
			require.NoError(b, err)
			data := make([]byte, 500)
			cycle := func() {
				_, err := bb.JS.Publish(ctx, bus.TasksSubject, data)
				require.NoError(b, err)
				batch, err := cons.Fetch(1)
				require.NoError(b, err)
				for m := range batch.Messages() {
					require.NoError(b, m.DoubleAck(ctx))
				}
			}
			for range 200 {
				cycle()
			}
			b.ResetTimer()
			t0 := cpuTime()
			for range b.N {
				cycle()
			}
			b.ReportMetric(float64((cpuTime()-t0).Microseconds())/float64(b.N), "cpu-µs/cycle")
		})
	}
}
