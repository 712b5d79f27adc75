package bus_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a log sink the worker's goroutines may write at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A worker taking a backlog one message per pull must always have a pull
// open while a handler is free. With the client's message iterator, a pull
// asked for right after the previous one was answered was sometimes never
// sent (the iterator skips it while it is still sending the previous one),
// and the worker sat idle beside a full stream until two heartbeats were
// missed: ~4 s, the slow runs of BenchmarkConcurrentSessions.
func TestWorkerNeverLosesAPullOverABacklog(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	const n = 1500
	for range n {
		require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "", []byte("payload")))
	}
	// Other work on the same connection, as in the herald process, where
	// every service shares one: the connection's lock is contended, so the
	// goroutine sending a pull request is often descheduled as it lets go.
	busy, stopBusy := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for busy.Err() == nil {
				_ = b.NC.Publish("noise", []byte("x"))
			}
		})
	}
	t.Cleanup(func() { stopBusy(); wg.Wait() })
	var logs syncBuffer
	var handled atomic.Int32
	w, err := bus.StartWorker(ctx, b.JS, bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "backlog",
		FilterSubjects: []string{bus.TasksSubject}, Concurrency: 4},
		func(context.Context, jetstream.Msg) error { handled.Add(1); return nil },
		zerolog.New(&logs).Level(zerolog.DebugLevel))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	require.Eventually(t, func() bool { return handled.Load() == n }, 2*time.Minute, 10*time.Millisecond)
	require.NotContains(t, logs.String(), "pull request lost", "a free handler waited on a pull the server never had")
	require.False(t, strings.Contains(logs.String(), "retrying"), logs.String())
}
