package api

import (
	"errors"
	"sync"
)

// errOverLimit says a run is beyond its key's or tenant's concurrency limit
// and the service is configured to reject rather than queue it.
var errOverLimit = errors.New("over the concurrency limit")

// ticket is what a run counts against: its key's and its tenant's limits.
type ticket struct {
	runID    string
	keyID    string
	keyLimit int
	tenant   string
}

// waiter is a queued run; ready is closed when it is admitted.
type waiter struct {
	ticket
	ready chan struct{}
	pos   int // the position it was last told
}

// admission holds runs to their key's and tenant's max_concurrent_runs.
// Runs beyond a limit wait in arrival order (or are refused, with reject);
// one waiting for a full limit never holds back one whose limits have room.
type admission struct {
	reject      bool
	tenantLimit map[string]int

	mu       sync.Mutex
	active   map[string]ticket
	byKey    map[string]int
	byTenant map[string]int
	queue    []*waiter
	// moved is told the runs whose queue position changed.
	moved func(positions map[string]int)
}

func newAdmission(reject bool, tenantLimit map[string]int) *admission {
	return &admission{reject: reject, tenantLimit: tenantLimit, active: map[string]ticket{},
		byKey: map[string]int{}, byTenant: map[string]int{}, moved: func(map[string]int) {}}
}

// admit takes a slot for t now (position 0), or queues it and returns its
// position (1: next) and a channel closed when it gets its slot.
func (a *admission) admit(t ticket) (int, <-chan struct{}, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fits(t) && a.position(t, len(a.queue)) == 1 {
		a.take(t)
		return 0, nil, nil
	}
	if a.reject {
		return 0, nil, errOverLimit
	}
	w := &waiter{ticket: t, ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	w.pos = a.position(t, len(a.queue)-1)
	return w.pos, w.ready, nil
}

// release frees the run's slot (a no-op for a run holding none) and admits
// the waiters that now fit, in order.
func (a *admission) release(runID string) {
	a.mu.Lock()
	t, ok := a.active[runID]
	if !ok {
		a.mu.Unlock()
		return
	}
	delete(a.active, runID)
	a.byKey[t.keyID]--
	a.byTenant[t.tenant]--
	moved := a.admitWaiters()
	a.mu.Unlock()
	if len(moved) > 0 {
		a.moved(moved)
	}
}

// withdraw removes a queued run (cancelled before it started); it reports
// whether the run was queued.
func (a *admission) withdraw(runID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, w := range a.queue {
		if w.runID == runID {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			return true
		}
	}
	return false
}

// admitWaiters admits every waiter that fits, in order, and returns the
// new positions of those still waiting whose position changed.
func (a *admission) admitWaiters() map[string]int {
	kept := a.queue[:0]
	for _, w := range a.queue {
		if a.fits(w.ticket) {
			a.take(w.ticket)
			close(w.ready)
			continue
		}
		kept = append(kept, w)
	}
	a.queue = kept
	positions := map[string]int{}
	for i, w := range a.queue {
		if pos := a.position(w.ticket, i); pos != w.pos {
			w.pos = pos
			positions[w.runID] = pos
		}
	}
	return positions
}

func (a *admission) fits(t ticket) bool {
	if t.keyLimit > 0 && a.byKey[t.keyID] >= t.keyLimit {
		return false
	}
	limit := a.tenantLimit[t.tenant]
	return limit <= 0 || a.byTenant[t.tenant] < limit
}

func (a *admission) take(t ticket) {
	a.active[t.runID] = t
	a.byKey[t.keyID]++
	a.byTenant[t.tenant]++
}

// position is 1 + the waiters before index i that share t's key or tenant:
// the runs that must start before it.
func (a *admission) position(t ticket, i int) int {
	n := 1
	for _, w := range a.queue[:i] {
		if w.tenant == t.tenant || (t.keyID != "" && w.keyID == t.keyID) {
			n++
		}
	}
	return n
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
