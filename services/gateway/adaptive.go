package gateway

import (
	"context"
	"sync"
	"time"
)

// adaptive is one process's own cap on the calls it sends a provider at
// once, moved by the provider's answers (AIMD): a rate limit (429) halves it
// and pauses new calls for the Retry-After the provider gave; successes
// raise it by one per limit's worth of calls answered (one a round trip, as
// TCP grows its window), back up to its ceiling. Only calls sent after the
// last halving move it: the answers of calls already on their way say
// nothing about the cut. Without it every waiting call
// retried on its own schedule and a provider that had just said "too many"
// got as many again (a retry storm).
type adaptive struct {
	ceiling int
	// fixed keeps the limit at the ceiling: the provider's shared limits
	// adapt instead, for every gateway at once (limits.go).
	fixed bool
	now   func() time.Time

	mu       sync.Mutex
	limit    float64
	inflight int
	paused   time.Time // no call starts before this
	// decreased is when the limit last halved: a 429 of a call sent before
	// it answers for the same overload and does not halve it again.
	decreased time.Time
	// freed is closed (and replaced) when a call ends or a pause is over.
	freed chan struct{}
}

func newAdaptive(ceiling int) *adaptive {
	return &adaptive{ceiling: ceiling, limit: float64(ceiling), now: time.Now, freed: make(chan struct{})}
}

// acquire waits until a call may start: no pause, fewer in flight than the
// limit. It returns when the call started, or ctx's error. waiting (if not
// nil) is told each time the call waits: paused, or at the cap.
func (a *adaptive) acquire(ctx context.Context, waiting func(paused bool, limit int)) (time.Time, error) {
	for {
		a.mu.Lock()
		now := a.now()
		wait, freed, limit := a.paused.Sub(now), a.freed, int(a.limit)
		if wait <= 0 && a.inflight < limit {
			a.inflight++
			a.mu.Unlock()
			return now, nil
		}
		a.mu.Unlock()
		if waiting != nil {
			waiting(wait > 0, limit)
		}
		if err := waitFor(ctx, freed, wait); err != nil {
			return time.Time{}, err
		}
	}
}

// done ends a call started at started; rateLimited says the provider
// refused it as too many, retryAfter how long it asked to be left alone.
func (a *adaptive) done(started time.Time, ok, rateLimited bool, retryAfter time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	now := a.now()
	fresh := !a.fixed && (started.After(a.decreased) || a.decreased.IsZero())
	switch {
	case rateLimited:
		if fresh {
			a.limit = max(1, min(a.limit, float64(a.inflight+1))/2)
			a.decreased = now
		}
		if retryAfter > 0 && now.Add(retryAfter).After(a.paused) {
			a.paused = now.Add(retryAfter)
		}
	case ok && fresh:
		a.limit = min(float64(a.ceiling), a.limit+1/a.limit)
	}
	close(a.freed)
	a.freed = make(chan struct{})
}

// pauseUntil holds new calls until t (another gateway's 429, pauses.go).
func (a *adaptive) pauseUntil(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.After(a.paused) {
		a.paused = t
	}
}

// current is the cap in force now and the calls in flight.
func (a *adaptive) current() (limit, inflight int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int(a.limit), a.inflight
}

// waitFor waits until freed is closed, d has passed (d > 0) or ctx ends.
func waitFor(ctx context.Context, freed <-chan struct{}, d time.Duration) error {
	if d <= 0 && freed == nil {
		return ctx.Err()
	}
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-freed:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
