package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
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

// deepFlood publishes flood tasks of acme and then three of globex, runs a
// worker with a window of 32 over them, and returns the place among the
// handled messages at which globex's first and last were handled, and how
// often each message was handled.
func deepFlood(t *testing.T, flood int, peek bool) (first, last int, handled map[string]int) {
	b := heraldtest.StartBus(t)
	for i := range flood {
		publishTask(t, b, "acme", "acme-"+strconv.Itoa(i))
	}
	for i := range 3 {
		publishTask(t, b, "globex", "globex-"+strconv.Itoa(i))
	}
	var mu sync.Mutex
	handled = map[string]int{}
	var n, globexFirst, globexLast atomic.Int32
	spec := bus.ConsumerSpec{Concurrency: 2, Lookahead: 32}
	if peek {
		spec.PeekSubjects = []string{bus.TenantTasksFilter}
	}
	startTaskWorker(t, b.JS, spec, func(_ context.Context, m jetstream.Msg) error {
		at := n.Add(1)
		body := string(m.Data())
		mu.Lock()
		handled[body]++
		mu.Unlock()
		if strings.HasPrefix(body, "globex") {
			globexFirst.CompareAndSwap(0, at)
			globexLast.Store(at)
		}
		time.Sleep(3 * time.Millisecond) // the work
		return nil
	})
	waitDrained(t, b, &mu, handled, flood+3)
	mu.Lock()
	defer mu.Unlock()
	return int(globexFirst.Load()), int(globexLast.Load()), handled
}

// waitDrained waits until want messages are handled and every one is gone
// from the work queue, those read past the window included (deleted, not
// left for the consumer).
func waitDrained(t *testing.T, b *heraldtest.Bus, mu *sync.Mutex, handled map[string]int, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == want
	}, time.Minute, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		n, err := bus.PendingWork(context.Background(), b.JS, bus.StreamTasks)
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond)
}

// A tenant whose tasks are published behind more than a window of another
// tenant's is served once the window is crowded, not when the window
// reaches it: the worker reads its oldest tasks from the stream past the
// window. Without the look past, the same flood holds it back to the end.
func TestATenantBehindAFloodDeeperThanTheWindowIsServed(t *testing.T) {
	const flood = 600
	first, last, handled := deepFlood(t, flood, true)
	t.Logf("looking past the window: globex's first handled %dth, its last %dth, of %d", first, last, flood+3)
	require.Less(t, first, 150, "globex waited behind acme's flood (handled %dth of %d)", first, flood+3)
	require.Less(t, last, 200, "globex's later tasks waited behind acme's flood (last handled %dth)", last)
	for body, times := range handled {
		// the worker never reads past its window what the consumer has
		// delivered, so with one process nothing is handled twice
		require.Equal(t, 1, times, "%s handled %d times", body, times)
	}

	first, _, _ = deepFlood(t, flood, false)
	t.Logf("not looking past it: globex's first handled %dth", first)
	require.Greater(t, first, flood-100, "without looking past the window globex was served %dth: the test would not tell the difference", first)
}

// A task read past the window whose handler fails is left to the
// consumer's deliveries, where its retries and MaxDeliver apply: it is
// not read past the window again. Before, a crowded window read it again
// every look (100 ms) and ran the failing handler each time, never nearer
// dead-lettering.
func TestAFailingTaskReadPastTheWindowIsLeftToItsDeliveries(t *testing.T) {
	b := heraldtest.StartBus(t)
	const flood = 400
	for i := range flood {
		publishTask(t, b, "acme", "acme-"+strconv.Itoa(i))
	}
	publishTask(t, b, "globex", "globex-failing")
	publishTask(t, b, "globex", "globex-fine")
	var mu sync.Mutex
	var failing []bool // per run of the failing task: was acme still flooding?
	var acmeDone atomic.Int32
	var fineAt, failingFirstAt atomic.Int32
	spec := bus.ConsumerSpec{Concurrency: 2, Lookahead: 32, MaxDeliver: 3, AckWait: 5 * time.Second,
		RetryDelays: []time.Duration{10 * time.Millisecond}, PeekSubjects: []string{bus.TenantTasksFilter}}
	startTaskWorker(t, b.JS, spec, func(_ context.Context, m jetstream.Msg) error {
		switch body := string(m.Data()); {
		case body == "globex-failing":
			mu.Lock()
			defer mu.Unlock()
			failingFirstAt.CompareAndSwap(0, acmeDone.Load()+1)
			failing = append(failing, acmeDone.Load() < flood)
			return errors.New("this task always fails")
		case body == "globex-fine":
			fineAt.Store(acmeDone.Load() + 1)
		default:
			acmeDone.Add(1)
			time.Sleep(3 * time.Millisecond) // the work
		}
		return nil
	})
	require.Eventually(t, func() bool { return len(heraldtest.DeadLetters(t, b.JS, bus.StreamTasks)) == 1 },
		time.Minute, 10*time.Millisecond, "the failing task is dead-lettered")
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("the failing task ran %d times (%v: during acme's flood), first after %d of acme's; the fine one after %d",
		len(failing), failing, failingFirstAt.Load(), fineAt.Load())
	require.Less(t, failingFirstAt.Load(), int32(flood/2), "the failing task was read past the window at first")
	require.Less(t, fineAt.Load(), int32(flood/2), "globex's next task is read past the window though its first failed")
	// one run read past the window, then MaxDeliver deliveries
	require.LessOrEqual(t, len(failing), spec.MaxDeliver+1, "the failing task ran %d times: read past the window again and again", len(failing))
	require.Equal(t, int32(flood), acmeDone.Load())
	dl := heraldtest.DeadLetters(t, b.JS, bus.StreamTasks)[0]
	require.Equal(t, "globex-failing", string(dl.Data))
}

// sharedFlood is deepFlood on herald.tasks, where each task names its
// tenant inside: flood of acme's, then three of globex's.
func sharedFlood(t *testing.T, flood int, peek bool) (first int, handled map[string]int) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	publish := func(tenant, prompt string) {
		body := `{"tenant":"` + tenant + `","prompt":"` + prompt + `"}`
		require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "", []byte(body)))
	}
	for i := range flood {
		publish("acme", "acme-"+strconv.Itoa(i))
	}
	for i := range 3 {
		publish("globex", "globex-"+strconv.Itoa(i))
	}
	var mu sync.Mutex
	handled = map[string]int{}
	var n, globexFirst atomic.Int32
	spec := bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "shared", FilterSubjects: []string{bus.TasksSubject},
		Concurrency: 2, Lookahead: 32}
	if peek {
		spec.PeekShared = []string{bus.TasksSubject}
	}
	w, err := bus.StartWorker(ctx, b.JS, spec, func(ctx context.Context, m jetstream.Msg) error {
		at := n.Add(1)
		var task struct{ Prompt string }
		require.NoError(t, json.Unmarshal(m.Data(), &task))
		mu.Lock()
		handled[task.Prompt]++
		mu.Unlock()
		if strings.HasPrefix(task.Prompt, "globex") {
			require.Equal(t, "globex", bus.TenantOf(ctx))
			globexFirst.CompareAndSwap(0, at)
		}
		time.Sleep(3 * time.Millisecond) // the work
		return nil
	}, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	waitDrained(t, b, &mu, handled, flood+3)
	mu.Lock()
	defer mu.Unlock()
	return int(globexFirst.Load()), handled
}

// A tenant whose tasks on herald.tasks (the tenant named in the task) are
// published behind more than a window of another tenant's is served once
// the window is crowded: the worker reads on past it, learning each task's
// tenant, and reads that tenant's oldest into its window. Without it the
// flood holds it back to the end.
func TestATenantBehindAFloodOnTheSharedSubjectIsServed(t *testing.T) {
	const flood = 600
	first, handled := sharedFlood(t, flood, true)
	t.Logf("reading past the window: globex's first handled %dth of %d", first, flood+3)
	require.Less(t, first, 150, "globex waited behind acme's flood (handled %dth of %d)", first, flood+3)
	for prompt, times := range handled {
		require.Equal(t, 1, times, "%s handled %d times", prompt, times)
	}
	first, _ = sharedFlood(t, flood, false)
	t.Logf("not reading past it: globex's first handled %dth", first)
	require.Greater(t, first, flood-100, "without reading past the window globex was served %dth: the test would not tell the difference", first)
}
