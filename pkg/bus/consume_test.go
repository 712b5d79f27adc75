package bus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func startWorker(t *testing.T, b *heraldtest.Bus, h bus.Handler) {
	t.Helper()
	ctx := context.Background()
	w, err := bus.StartWorker(ctx, b.JS, bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "test",
		FilterSubjects: []string{bus.TasksSubject}, MaxDeliver: 3,
		RetryDelays: []time.Duration{time.Millisecond}}, h, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
}

func TestHandlerOutcomes(t *testing.T) {
	cases := []struct {
		name       string
		handler    func(calls int32) error
		wantCalls  int32
		wantReason string // empty: not dead-lettered
	}{
		{"success is acked once", func(int32) error { return nil }, 1, ""},
		{"retryable error is retried until it succeeds", func(n int32) error {
			if n < 3 {
				return errors.New("flaky")
			}
			return nil
		}, 3, ""},
		{"permanent error is dead-lettered at once", func(int32) error { return bus.Permanent(errors.New("bad payload")) }, 1, "bad payload"},
		{"retryable error is dead-lettered after MaxDeliver", func(int32) error { return errors.New("still down") }, 3, "failed 3 deliveries: still down"},
		{"a panic is an error, not a crash", func(int32) error { panic("boom") }, 3, "failed 3 deliveries: handler panicked: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := heraldtest.StartBus(t)
			var calls atomic.Int32
			startWorker(t, b, func(ctx context.Context, m jetstream.Msg) error { return tc.handler(calls.Add(1)) })
			require.NoError(t, bus.Publish(context.Background(), b.JS, bus.TasksSubject, "", []byte("payload")))
			require.Eventually(t, func() bool { return calls.Load() >= tc.wantCalls }, 5*time.Second, 5*time.Millisecond)
			if tc.wantReason == "" {
				require.Eventually(t, func() bool { return streamEmpty(t, b) }, 5*time.Second, 5*time.Millisecond,
					"an acked work-queue message leaves the stream")
				require.Empty(t, heraldtest.DeadLetters(t, b.JS, bus.StreamTasks))
				return
			}
			var dl []*jetstream.RawStreamMsg
			require.Eventually(t, func() bool {
				dl = heraldtest.DeadLetters(t, b.JS, bus.StreamTasks)
				return len(dl) == 1
			}, 5*time.Second, 5*time.Millisecond)
			require.Equal(t, tc.wantReason, dl[0].Header.Get(bus.HeaderError))
			require.Equal(t, bus.TasksSubject, dl[0].Header.Get(bus.HeaderSubject))
			require.Equal(t, "payload", string(dl[0].Data), "the original payload is kept")
			require.Equal(t, tc.wantCalls, calls.Load(), "no delivery after dead-lettering")
		})
	}
}

// TestMessageArrivingWhileHandlersAreBusyIsNotLeftForAckWait: a message that
// arrives while every handler is busy (longer than the pull heartbeats) is
// handled as soon as a handler frees up, once; it must not be taken by the
// client, dropped and left for the server to redeliver after AckWait.
func TestMessageArrivingWhileHandlersAreBusyIsNotLeftForAckWait(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	release := make(chan struct{})
	var mu sync.Mutex
	handled := map[string]int{}
	h := func(ctx context.Context, m jetstream.Msg) error {
		mu.Lock()
		handled[string(m.Data())]++
		mu.Unlock()
		if strings.HasPrefix(string(m.Data()), "busy") {
			<-release
		}
		return nil
	}
	const ackWait = time.Minute
	w, err := bus.StartWorker(ctx, b.JS, bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "busy",
		FilterSubjects: []string{bus.TasksSubject}, Concurrency: 2, AckWait: ackWait}, h, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	count := func(payload string) int {
		mu.Lock()
		defer mu.Unlock()
		return handled[payload]
	}
	for _, p := range []string{"busy-1", "busy-2", "queued"} {
		require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "", []byte(p)))
	}
	require.Eventually(t, func() bool { return count("busy-1") == 1 && count("busy-2") == 1 }, 5*time.Second, 5*time.Millisecond)
	// The handlers stay busy for more than two pull heartbeats (2 s each):
	// long enough to fill a buffering iterator with heartbeats.
	<-time.After(5 * time.Second)
	require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "", []byte("late")))
	close(release)
	require.Eventually(t, func() bool { return count("queued") == 1 && count("late") == 1 }, ackWait/3, 10*time.Millisecond,
		"a message that came while the handlers were busy waited for AckWait")
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, map[string]int{"busy-1": 1, "busy-2": 1, "queued": 1, "late": 1}, handled, "each message handled once")
}

func streamEmpty(t *testing.T, b *heraldtest.Bus) bool {
	n, err := bus.PendingWork(context.Background(), b.JS, bus.StreamTasks)
	require.NoError(t, err)
	return n == 0
}

func TestTokenKeepsSubjectsValid(t *testing.T) {
	require.Equal(t, "call_1", bus.Token("call_1"))
	odd := bus.Token("toolu.01 x>*")
	require.NotContains(t, odd, ".")
	require.NotContains(t, odd, "*")
	require.Equal(t, odd, bus.Token("toolu.01 x>*"), "stable")
}
