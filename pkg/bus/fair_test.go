package bus_test

import (
	"context"
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

// handledLog records what a handler handled, in order.
type handledLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *handledLog) add(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s)
	return len(l.seen)
}

func (l *handledLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

func publishTask(t *testing.T, b *heraldtest.Bus, tenant, payload string) {
	t.Helper()
	require.NoError(t, bus.Publish(context.Background(), b.JS, bus.TenantTasks(tenant), "", []byte(payload)))
}

func startTaskWorker(t *testing.T, js jetstream.JetStream, spec bus.ConsumerSpec, h bus.Handler) *bus.Worker {
	t.Helper()
	spec.Stream, spec.FilterSubjects = bus.StreamTasks, []string{bus.TenantTasksFilter}
	if spec.Durable == "" {
		spec.Durable = "fair"
	}
	w, err := bus.StartWorker(context.Background(), js, spec, h, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// A tenant that publishes after another tenant's flood is served before
// that flood is done: it waits behind its own work, not acme's.
func TestAFloodingTenantDoesNotHoldBackAnother(t *testing.T) {
	b := heraldtest.StartBus(t)
	const flood = 300
	for i := range flood {
		publishTask(t, b, "acme", "acme-"+strconv.Itoa(i))
	}
	publishTask(t, b, "globex", "globex-0")
	var log handledLog
	var globexAt atomic.Int32
	startTaskWorker(t, b.JS, bus.ConsumerSpec{Concurrency: 4, Lookahead: 512}, func(ctx context.Context, m jetstream.Msg) error {
		n := log.add(string(m.Data()))
		if strings.HasPrefix(string(m.Data()), "globex") {
			require.Equal(t, "globex", bus.TenantOf(ctx), "the handler's context carries the message's tenant")
			globexAt.Store(int32(n))
		}
		time.Sleep(2 * time.Millisecond) // the work
		return nil
	})
	require.Eventually(t, func() bool { return len(log.list()) == flood+1 }, 30*time.Second, 10*time.Millisecond)
	// First come, first served, globex would be 301st; fairly, it is served
	// as soon as its message is in the window, among the first pulls.
	require.LessOrEqual(t, int(globexAt.Load()), 80, "globex waited behind acme's flood")
	var acme []string
	for _, s := range log.list() {
		if strings.HasPrefix(s, "acme") {
			acme = append(acme, s)
		}
	}
	for i, s := range acme {
		// handed out in order; 4 handler goroutines may log them a little
		// out of it (TestWeightsShareTheHandlers checks the order with one)
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "acme-"))
		require.InDelta(t, i, n, 16, "acme's own work is served in its order")
	}
}

// Both tenants saturate the worker: handlers are shared 3:1 by weight.
func TestWeightsShareTheHandlers(t *testing.T) {
	b := heraldtest.StartBus(t)
	for i := range 400 {
		publishTask(t, b, "acme", "acme-"+strconv.Itoa(i))
		publishTask(t, b, "globex", "globex-"+strconv.Itoa(i))
	}
	var log handledLog
	weight := func(tenant string) int { return map[string]int{"acme": 3}[tenant] }
	startTaskWorker(t, b.JS, bus.ConsumerSpec{Concurrency: 1, Lookahead: 1024, Weight: weight}, func(ctx context.Context, m jetstream.Msg) error {
		log.add(string(m.Data()))
		time.Sleep(time.Millisecond) // the work: the window fills meanwhile
		return nil
	})
	require.Eventually(t, func() bool { return len(log.list()) >= 400 }, 30*time.Second, 10*time.Millisecond)
	acme, order := 0, -1
	for _, s := range log.list()[:400] {
		if n, ok := strings.CutPrefix(s, "acme-"); ok {
			acme++
			i, _ := strconv.Atoi(n)
			require.Greater(t, i, order, "one handler: acme's work in its order")
			order = i
		}
	}
	require.InEpsilon(t, 300, acme, 0.1, "acme (weight 3) got %d of the first 400 turns", acme)
}

// Messages waiting in a worker's window are kept alive: each is handled
// once though the window holds them for several AckWaits.
func TestWaitingInTheWindowIsNotRedelivered(t *testing.T) {
	b := heraldtest.StartBus(t)
	for i := range 30 {
		publishTask(t, b, "acme", strconv.Itoa(i))
	}
	var mu sync.Mutex
	deliveries := map[string]uint64{}
	var handled atomic.Int32
	startTaskWorker(t, b.JS, bus.ConsumerSpec{Concurrency: 1, AckWait: time.Second}, func(ctx context.Context, m jetstream.Msg) error {
		meta, err := m.Metadata()
		require.NoError(t, err)
		mu.Lock()
		deliveries[string(m.Data())] = max(deliveries[string(m.Data())], meta.NumDelivered)
		mu.Unlock()
		time.Sleep(150 * time.Millisecond) // the work: 30 × 150 ms is 4.5 AckWaits
		handled.Add(1)
		return nil
	})
	require.Eventually(t, func() bool { return handled.Load() == 30 }, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for p, n := range deliveries {
		require.Equal(t, uint64(1), n, "message %s was redelivered while it waited", p)
	}
}

// A process that dies with messages in its window loses none: the server
// redelivers them to another process after AckWait.
func TestWindowOfADeadProcessIsRedelivered(t *testing.T) {
	b := heraldtest.StartBus(t)
	const n = 40
	for i := range n {
		publishTask(t, b, "acme", strconv.Itoa(i))
	}
	nc1, js1 := b.Connect(t, "doomed")
	stuck := make(chan struct{})
	spec := bus.ConsumerSpec{Durable: "shared", Concurrency: 1, AckWait: time.Second, MaxDeliver: 3}
	startTaskWorker(t, js1, spec, func(ctx context.Context, m jetstream.Msg) error {
		<-stuck
		return errors.New("never finished")
	})
	t.Cleanup(func() { close(stuck) }) // runs before the worker's Stop
	cons, err := b.JS.Consumer(context.Background(), bus.StreamTasks, "shared")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == n
	}, 10*time.Second, 10*time.Millisecond, "the first process holds every message: one in its handler, the rest in its window")
	nc1.Close() // the process dies: no ack, no nak, no InProgress from now on

	var log handledLog
	_, js2 := b.Connect(t, "survivor")
	startTaskWorker(t, js2, spec, func(ctx context.Context, m jetstream.Msg) error {
		log.add(string(m.Data()))
		return nil
	})
	require.Eventually(t, func() bool { return len(log.list()) == n }, 30*time.Second, 10*time.Millisecond)
	seen := map[string]bool{}
	for _, s := range log.list() {
		require.False(t, seen[s], "message %s handled twice", s)
		seen[s] = true
	}
	require.Empty(t, heraldtest.DeadLetters(t, b.JS, bus.StreamTasks))
}

// A handler's Wait keeps its message without failing it: it is never
// dead-lettered however long it waits (longer than MaxDeliver × AckWait), it
// is tried again when room frees, and another tenant's work is not held
// back. The limit here, like a tenant's (slots.go), lets waiters through
// oldest first.
func TestWaitingMessagesAreTriedAgainAndNeverFail(t *testing.T) {
	b := heraldtest.StartBus(t)
	var mu sync.Mutex
	holding, nextUp := 0, 0
	var started handledLog
	var release []chan struct{}
	for i := range 6 {
		publishTask(t, b, "acme", strconv.Itoa(i))
		release = append(release, make(chan struct{}))
	}
	publishTask(t, b, "globex", "other")
	var once sync.Once
	releaseAll := func() {
		once.Do(func() {
			for _, c := range release {
				select {
				case <-c:
				default:
					close(c)
				}
			}
		})
	}
	startTaskWorker(t, b.JS, bus.ConsumerSpec{Concurrency: 8, MaxDeliver: 2, AckWait: 100 * time.Millisecond}, func(ctx context.Context, m jetstream.Msg) error {
		if bus.TenantOf(ctx) == "globex" {
			started.add("other")
			return nil
		}
		i, _ := strconv.Atoi(string(m.Data()))
		mu.Lock()
		if holding == 1 || i != nextUp {
			mu.Unlock()
			return bus.Wait("acme-sessions", errors.New("acme is at its limit"))
		}
		holding++
		nextUp++
		mu.Unlock()
		started.add(string(m.Data()))
		<-release[i]
		mu.Lock()
		holding--
		mu.Unlock()
		return nil
	})
	t.Cleanup(releaseAll) // runs before the worker's Stop
	require.Eventually(t, func() bool { return len(started.list()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.ElementsMatch(t, []string{"0", "other"}, started.list(), "another tenant is not held back by acme's limit")
	for i := range 6 {
		// longer than MaxDeliver × AckWait would allow a failing message
		require.Never(t, func() bool { return len(started.list()) > i+2 }, 300*time.Millisecond, 20*time.Millisecond)
		close(release[i])
		if i < 5 {
			require.Eventually(t, func() bool { return len(started.list()) == i+3 }, 10*time.Second, 5*time.Millisecond)
		}
	}
	var acme []string
	for _, s := range started.list() {
		if s != "other" {
			acme = append(acme, s)
		}
	}
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5"}, acme, "waiting messages start in their order")
	require.Eventually(t, func() bool { return streamEmpty(t, b) }, 10*time.Second, 10*time.Millisecond)
	require.Empty(t, heraldtest.DeadLetters(t, b.JS, bus.StreamTasks))
}

// A task's publisher cannot choose whose turn its task takes: on task
// subjects the Herald-Tenant header is ignored, the subject's tenant (or
// the body's, on herald.tasks) counts.
func TestAForgedTenantHeaderOnATaskIsIgnored(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	forged := func(subject, body string) {
		m := bus.NewMsg(subject, []byte(body))
		m.Header.Set(bus.HeaderTenant, "globex")
		_, err := b.JS.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	forged(bus.TenantTasks("acme"), "on acme's subject")
	forged(bus.TasksSubject, `{"prompt":"body names acme","tenant":"acme"}`)
	forged(bus.TasksSubject, `{"prompt":"names no tenant"}`)
	var mu sync.Mutex
	seen := map[string]string{}
	w, err := bus.StartWorker(ctx, b.JS, bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "forged",
		FilterSubjects: []string{bus.TasksSubject, bus.TenantTasksFilter}}, func(ctx context.Context, m jetstream.Msg) error {
		mu.Lock()
		seen[string(m.Data())] = bus.TenantOf(ctx)
		mu.Unlock()
		return nil
	}, heraldtest.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, map[string]string{
		"on acme's subject":                            "acme",
		`{"prompt":"body names acme","tenant":"acme"}`: "acme",
		`{"prompt":"names no tenant"}`:                 "",
	}, seen)
}
