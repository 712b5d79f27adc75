package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestAFreeHandlerTakesEachMessageWhileAnotherIsHeld: handler goroutines
// are kept from one message to the next (handlers.go); round after round,
// with one handler held, every other message is handled at once, never
// queued behind the held one, each is handled once, and the worker never
// runs more handlers at once than its concurrency.
func TestAFreeHandlerTakesEachMessageWhileAnotherIsHeld(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	const conc = 4
	var mu sync.Mutex
	handled, running, most := map[string]int{}, 0, 0
	held, quit := make(chan struct{}), make(chan struct{})
	h := func(ctx context.Context, m jetstream.Msg) error {
		mu.Lock()
		handled[string(m.Data())]++
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		if string(m.Data()[:4]) == "held" {
			select {
			case <-held:
			case <-quit:
			}
		}
		return nil
	}
	w, err := bus.StartWorker(ctx, b.JS, bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "reuse",
		FilterSubjects: []string{bus.TasksSubject}, Concurrency: conc, AckWait: time.Minute}, h, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	t.Cleanup(func() { close(quit) }) // first: a failed round leaves a handler held
	count := func(p string) int { mu.Lock(); defer mu.Unlock(); return handled[p] }
	for round := range 20 {
		require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "", fmt.Appendf(nil, "held-%d", round)))
		require.Eventually(t, func() bool { return count(fmt.Sprintf("held-%d", round)) == 1 }, 5*time.Second, time.Millisecond)
		for i := range conc - 1 {
			require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "", fmt.Appendf(nil, "free-%d-%d", round, i)))
		}
		require.Eventually(t, func() bool {
			for i := range conc - 1 {
				if count(fmt.Sprintf("free-%d-%d", round, i)) != 1 {
					return false
				}
			}
			return true
		}, 5*time.Second, time.Millisecond, "round %d: a message waited behind the held one", round)
		held <- struct{}{}
	}
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 5*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, most, conc)
	require.Len(t, handled, 20*conc, "every message handled")
	for p, n := range handled {
		require.Equal(t, 1, n, "%s handled once", p)
	}
}
