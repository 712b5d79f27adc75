package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
)

// errOverLimit says a run is beyond its key's or tenant's concurrency limit
// and the service is configured to reject rather than queue it.
var errOverLimit = errors.New("over the concurrency limit")

// errQueueFull says a run would wait but its tenant already has as many
// runs waiting as it may.
var errQueueFull = errors.New("too many runs waiting")

// DefaultMaxQueuedRuns is how many runs of one tenant may wait in a process
// unless configured (api.max_queued_runs).
const DefaultMaxQueuedRuns = 1000

// admitTimeout bounds the round trips to the limits bucket of one admission
// step (not the wait for the admission's lock).
const admitTimeout = 10 * time.Second

// ticket is what a run counts against: its key's and its tenant's limits.
type ticket struct {
	runID    string
	keyID    string
	keyLimit int
	tenant   string
	// order places the run among those waiting (its arrival, Unix ns).
	order int64
	// resumed is a run a previous process had queued: already accepted, it
	// is not held to the cap on waiting runs.
	resumed bool
}

// waiter is a queued run. ready receives once: true when the run is
// admitted, false when it is withdrawn, so whoever waits on it ends either
// way.
type waiter struct {
	ticket
	ready chan bool
	pos   int // the position it was last told
}

func newWaiter(t ticket, pos int) *waiter {
	return &waiter{ticket: t, ready: make(chan bool, 1), pos: pos}
}

// retryEvery is how often queued runs ask again for room freed by another
// process (room this process frees is offered at once).
const retryEvery = 200 * time.Millisecond

// admission holds runs to their key's and tenant's max_concurrent_runs,
// counted across every api process and with the loop's
// max_concurrent_sessions, which is the same limit (bus.Slots: a run's slot
// is its task's, under the run's id). Runs beyond a limit wait in arrival
// order (or are refused, with reject); one waiting for a full limit never
// holds back one whose limits have room.
type admission struct {
	reject      bool
	tenantLimit map[string]int
	// maxQueued caps each tenant's waiting runs (0: no cap).
	maxQueued int
	slots     *bus.Slots

	mu     sync.Mutex
	active map[string]ticket
	queue  []*waiter
	// waiting counts the queue's runs by tenant.
	waiting map[string]int
	// moved is told the runs whose queue position changed.
	moved func(positions map[string]int)
	// retry wakes the loop that offers freed room to the queue.
	retry   chan struct{}
	started sync.Once
}

func newAdmission(reject bool, tenantLimit map[string]int, maxQueued int, slots *bus.Slots) *admission {
	return &admission{reject: reject, tenantLimit: tenantLimit, maxQueued: maxQueued, slots: slots,
		active: map[string]ticket{}, waiting: map[string]int{}, moved: func(map[string]int) {}, retry: make(chan struct{}, 1)}
}

// run offers freed room to queued runs until ctx ends.
func (a *admission) run(ctx context.Context) {
	t := time.NewTicker(retryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.retry:
		}
		if moved := a.admitWaiters(ctx); len(moved) > 0 {
			a.moved(moved)
		}
	}
}

func (a *admission) start(ctx context.Context) {
	a.started.Do(func() { go a.run(ctx) })
}

// admit takes a slot for t now (position 0), or queues it and returns its
// position (1: next) and the channel that says when it gets its slot or is
// withdrawn. A refused run (errOverLimit, errQueueFull, or the limits bucket
// failing) holds nothing.
func (a *admission) admit(t ticket) (int, <-chan bool, error) {
	if t.order == 0 {
		t.order = time.Now().UnixNano()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
	defer cancel()
	pos, err := a.try(ctx, t)
	switch {
	case err != nil:
		// it may hold its key's slot, the tenant's having failed; ctx may be spent
		undo, cancel := context.WithTimeout(context.Background(), admitTimeout)
		defer cancel()
		a.forget(undo, t)
		return 0, nil, fmt.Errorf("admit run %s: %w", t.runID, err)
	case pos == 0:
		a.active[t.runID] = t
		return 0, nil, nil
	case a.reject:
		a.forget(ctx, t)
		return 0, nil, errOverLimit
	case !t.resumed && a.maxQueued > 0 && a.waiting[t.tenant] >= a.maxQueued:
		a.forget(ctx, t)
		return 0, nil, errQueueFull
	}
	w := newWaiter(t, pos)
	a.queue = append(a.queue, w)
	a.waiting[t.tenant]++
	return pos, w.ready, nil
}

// try asks for t's slots, its key's then its tenant's; it returns 0 when t
// holds both, else its position in the queue it waits in. A run waiting for
// its tenant keeps its key's slot meanwhile: the key's other runs would wait
// for the same tenant.
func (a *admission) try(ctx context.Context, t ticket) (int, error) {
	if t.keyLimit > 0 && t.keyID != "" {
		p, err := a.slots.Acquire(ctx, bus.KeyRunsScope(t.keyID), t.keyLimit, t.runID, t.order)
		if err != nil || p.Position > 0 {
			return p.Position, err
		}
	}
	if limit := a.tenantLimit[t.tenant]; limit > 0 {
		p, err := a.slots.Acquire(ctx, bus.SessionsScope(t.tenant), limit, t.runID, t.order)
		return p.Position, err
	}
	return 0, nil
}

// forget gives back t's slots and places.
func (a *admission) forget(ctx context.Context, t ticket) {
	if a.tenantLimit[t.tenant] > 0 {
		_ = a.slots.Release(ctx, bus.SessionsScope(t.tenant), t.runID)
	}
	if t.keyLimit > 0 && t.keyID != "" {
		_ = a.slots.Release(ctx, bus.KeyRunsScope(t.keyID), t.runID)
	}
}

// release frees the run's slot (a no-op for a run holding none) and offers
// the room to the queue at once.
func (a *admission) release(runID string) {
	a.mu.Lock()
	t, ok := a.active[runID]
	delete(a.active, runID)
	a.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
	defer cancel()
	a.forget(ctx, t)
	select {
	case a.retry <- struct{}{}:
	default:
	}
}

// withdraw removes a queued run (cancelled before it started) and tells its
// waiter; it reports whether the run was queued.
func (a *admission) withdraw(runID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.IndexFunc(a.queue, func(w *waiter) bool { return w.runID == runID })
	if i < 0 {
		return false
	}
	w := a.queue[i]
	a.queue = slices.Delete(a.queue, i, i+1)
	a.unwait(w, false)
	ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
	defer cancel()
	a.forget(ctx, w.ticket)
	return true
}

// unwait tells w's run it is admitted or withdrawn, and stops counting it
// among its tenant's waiting runs. Called with a.mu held, once per waiter.
func (a *admission) unwait(w *waiter, admitted bool) {
	w.ready <- admitted
	if a.waiting[w.tenant]--; a.waiting[w.tenant] <= 0 {
		delete(a.waiting, w.tenant)
	}
}

// admitWaiters asks again, in order, for every queued run, admits those
// that get their slots, and returns the new positions of those still
// waiting whose position changed.
func (a *admission) admitWaiters(ctx context.Context) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, admitTimeout)
	defer cancel()
	positions := map[string]int{}
	kept := a.queue[:0]
	for _, w := range a.queue {
		pos, err := a.try(ctx, w.ticket)
		switch {
		case err != nil:
			kept = append(kept, w) // asked again at the next turn
		case pos == 0:
			a.active[w.runID] = w.ticket
			a.unwait(w, true)
		default:
			if pos != w.pos {
				w.pos = pos
				positions[w.runID] = pos
			}
			kept = append(kept, w)
		}
	}
	clear(a.queue[len(kept):])
	a.queue = kept
	return positions
}

// activeRuns lists the runs holding a slot.
func (a *admission) activeRuns() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.active))
	for id := range a.active {
		ids = append(ids, id)
	}
	return ids
}
