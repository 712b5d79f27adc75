package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The attack: acme, limited to one session at a time, floods the stream
// with ten times more tasks than the consumer's MaxAckPending. Waiting
// tasks used to stay delivered in the worker's window, so acme's flood
// took every pending slot of the consumer and globex's task was not even
// delivered until acme's backlog drained. Now the worker keeps only the
// oldest few waiting and hands the rest back to the stream: globex's task
// starts at once; every one of acme's runs exactly once, in the order
// published; none is dead-lettered, though each was delivered far more
// often than MaxDeliver.
func TestAFloodBeyondALimitNeitherStarvesOthersNorDeadLetters(t *testing.T) {
	b := heraldtest.StartBus(t)
	const flood, work = 200, 20 * time.Millisecond
	for i := range flood {
		publishTask(t, b, "acme", strconv.Itoa(i))
	}
	slots := bus.NewSlots(b.JS)
	var ran handledLog
	var globexAt atomic.Int64
	var mostDeliveries atomic.Uint64
	spec := bus.ConsumerSpec{Concurrency: 4, Lookahead: 8, MaxParked: 12, MaxParkedPerScope: 8,
		MaxAckPending: 30, MaxDeliver: 2, AckWait: time.Second, Waits: true}
	startTaskWorker(t, b.JS, spec, func(ctx context.Context, m jetstream.Msg) error {
		meta, err := m.Metadata()
		require.NoError(t, err)
		if meta.NumDelivered > mostDeliveries.Load() {
			mostDeliveries.Store(meta.NumDelivered)
		}
		if bus.TenantOf(ctx) == "globex" {
			globexAt.Store(time.Now().UnixNano())
			return nil
		}
		id := string(m.Data())
		place, err := slots.Acquire(ctx, bus.SessionsScope("acme"), 1, id, meta.Timestamp.UnixNano())
		if err != nil {
			return err
		}
		if place.Position > 0 {
			return bus.WaitAt(bus.SessionsScope("acme"), place.Position, errors.New("acme is at its limit"))
		}
		ran.add(id)
		time.Sleep(work) // the session's turn
		return slots.Release(ctx, bus.SessionsScope("acme"), id)
	})
	require.Eventually(t, func() bool { return len(ran.list()) >= 5 }, 10*time.Second, 5*time.Millisecond, "acme's flood is under way")
	published := time.Now()
	publishTask(t, b, "globex", "other")
	require.Eventually(t, func() bool { return globexAt.Load() != 0 }, 10*time.Second, 5*time.Millisecond)
	took := time.Duration(globexAt.Load() - published.UnixNano())
	t.Logf("globex's task started %s after it was published, acme had run %d of %d", took, len(ran.list()), flood)
	// before, globex's task was not even delivered until acme's waiting
	// tasks fell below MaxAckPending: after 170 of the 200 had run
	require.Less(t, len(ran.list()), flood/2, "globex's task is not held behind acme's flood")

	require.Eventually(t, func() bool { return len(ran.list()) == flood }, 60*time.Second, 10*time.Millisecond)
	got := ran.list()
	want := make([]string, flood)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	require.ElementsMatch(t, want, got, "each of acme's tasks ran once")
	// the first, taken by the handlers at once, race for the free slot;
	// from then on every task waited, and the waiters go in publish order
	first := spec.Concurrency
	require.Equal(t, want[first:], got[first:], "tasks that waited ran in the order published")
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 10*time.Second, 10*time.Millisecond)
	require.Empty(t, heraldtest.DeadLetters(t, b.JS, bus.StreamTasks))
	require.Greater(t, mostDeliveries.Load(), uint64(spec.MaxDeliver), "tasks were handed back and delivered again, more often than MaxDeliver")
}

// A task handed back while it waited, delivered again and again, still
// gets its MaxDeliver failures once it runs: the hand-backs do not count.
// Before, the server stopped delivering it after MaxDeliver deliveries,
// waiting or not.
func TestHandBacksDoNotCountTowardMaxDeliver(t *testing.T) {
	b := heraldtest.StartBus(t)
	publishTask(t, b, "acme", "first")
	publishTask(t, b, "acme", "second")
	var mu sync.Mutex
	open := false
	var secondTries, secondFailures int
	spec := bus.ConsumerSpec{Concurrency: 2, MaxParked: 1, MaxParkedPerScope: 1, MaxDeliver: 3, AckWait: time.Second,
		RetryDelays: []time.Duration{10 * time.Millisecond}, Waits: true}
	startTaskWorker(t, b.JS, spec, func(ctx context.Context, m jetstream.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		if string(m.Data()) == "second" {
			if !open {
				secondTries++
				return bus.Wait("gate", errors.New("closed"))
			}
			secondFailures++
			return fmt.Errorf("failure %d", secondFailures)
		}
		if !open {
			return bus.Wait("gate", errors.New("closed"))
		}
		return nil
	})
	// one waiting message is kept, the other handed back again and again
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return secondTries > spec.MaxDeliver+1
	}, 30*time.Second, 10*time.Millisecond, "the newer waiting message is handed back and delivered again")
	mu.Lock()
	open = true
	mu.Unlock()
	require.Eventually(t, func() bool { return len(heraldtest.DeadLetters(t, b.JS, bus.StreamTasks)) == 1 }, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	require.Equal(t, spec.MaxDeliver, secondFailures, "dead-lettered after MaxDeliver failures, its hand-backs aside")
	mu.Unlock()
	dl := heraldtest.DeadLetters(t, b.JS, bus.StreamTasks)[0]
	require.Equal(t, "second", string(dl.Data))
	require.Contains(t, dl.Header.Get(bus.HeaderError), "failed 3 deliveries: failure 3")
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 10*time.Second, 10*time.Millisecond)
}

// A waiting task outlives more restarts of its worker than MaxDeliver
// allows deliveries: a worker that stops hands its waiting tasks back
// counted, so they run once room frees and are never dead-lettered for
// having waited.
func TestAWaitingTaskOutlivesRestartsOfItsWorker(t *testing.T) {
	b := heraldtest.StartBus(t)
	publishTask(t, b, "acme", "patient")
	var open atomic.Bool
	var tries, ran atomic.Int32
	spec := bus.ConsumerSpec{Stream: bus.StreamTasks, FilterSubjects: []string{bus.TenantTasksFilter}, Durable: "restarts",
		Concurrency: 1, MaxDeliver: 2, AckWait: time.Second, Waits: true}
	h := func(ctx context.Context, m jetstream.Msg) error {
		tries.Add(1)
		if !open.Load() {
			return bus.Wait("gate", errors.New("closed"))
		}
		ran.Add(1)
		return nil
	}
	for i := range 2 * spec.MaxDeliver {
		w, err := bus.StartWorker(context.Background(), b.JS, spec, h, heraldtest.Logger(t))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return tries.Load() > int32(i) }, 10*time.Second, 5*time.Millisecond, "restart %d: the task was delivered and waits", i)
		require.NoError(t, w.Stop(context.Background()))
	}
	open.Store(true)
	startTaskWorker(t, b.JS, spec, h)
	require.Eventually(t, func() bool { return ran.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, int32(1), ran.Load())
	require.Empty(t, heraldtest.DeadLetters(t, b.JS, bus.StreamTasks))
}
