package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketLimits holds the limits every process shares (Slots): per scope,
// who holds a slot and who waits for one.
const BucketLimits = "herald_limits"

// Leases of the limits bucket: a slot not released (its holder's process
// died between the end of its work and the release) frees itself after
// HeldLease; a waiter not heard from (its message went to another process,
// or was dead-lettered) leaves the queue after WaitLease. Waiting messages
// are tried again far more often (parkRetry, refreshAll).
const (
	HeldLease = time.Hour
	WaitLease = 30 * time.Second
)

// Slots are counting limits held across every process (a tenant's
// sessions, its model calls, an API key's runs): one KV record per scope,
// changed only by compare-and-set, so two processes can never both take the
// last slot. Waiters queue by their order (a publish time) and are let
// through oldest first.
//
// The record is written when a slot changes hands, a waiter joins or
// leaves, or a waiter's lease is a third gone; never because a waiter
// moved up. Which place a waiter was last told is this process's own
// (told): a waiter whose message moves to another process is told its
// place there once more. Kept in the record, a release wrote it once per
// waiter that moved up, each time the whole queue.
type Slots struct {
	b   *LazyBucket
	now func() time.Time

	mu     sync.Mutex
	told   map[toldKey]toldPlace
	pruned time.Time
}

type toldKey struct{ scope, holder string }

// toldPlace is the place a waiter was last told, and when it last asked.
type toldPlace struct {
	position int
	asked    time.Time
}

// NewSlots returns the shared limits stored in js's BucketLimits.
func NewSlots(js jetstream.JetStream) *Slots {
	return &Slots{b: NewLazyBucket(js, BucketLimits), now: time.Now, told: map[toldKey]toldPlace{}}
}

type slotRecord struct {
	// Held maps a holder to the end of its lease (Unix ms).
	Held    map[string]int64 `json:"held,omitempty"`
	Waiting []slotWaiter     `json:"waiting,omitempty"`
}

type slotWaiter struct {
	ID    string `json:"id"`
	Order int64  `json:"order"`
	Until int64  `json:"until"`
}

// Place is where a holder stands under a limit.
type Place struct {
	// Position is 0 for a holder of a slot, else 1 + the waiters before it.
	Position int
	// Moved is set when Position is not what the holder was last told.
	Moved bool
}

// ErrSlotsBusy is returned when the record kept changing under an update.
var ErrSlotsBusy = errors.New("limits record kept changing")

// Acquire takes a slot of scope (at most limit held) for holder, or queues
// it by order. A holder that holds one already keeps it (its lease renewed).
func (s *Slots) Acquire(ctx context.Context, scope string, limit int, holder string, order int64) (Place, error) {
	var place Place
	err := s.update(ctx, scope, func(r *slotRecord, now int64) bool {
		if _, ok := r.Held[holder]; ok {
			r.Held[holder] = now + HeldLease.Milliseconds()
			place = Place{}
			return true
		}
		i := slices.IndexFunc(r.Waiting, func(w slotWaiter) bool { return w.ID == holder })
		if i < 0 {
			r.Waiting = append(r.Waiting, slotWaiter{ID: holder, Order: order})
			slices.SortStableFunc(r.Waiting, waiterOrder)
			i = slices.IndexFunc(r.Waiting, func(w slotWaiter) bool { return w.ID == holder })
		}
		if i == 0 && len(r.Held) < limit {
			r.Waiting = slices.Delete(r.Waiting, 0, 1)
			r.Held[holder] = now + HeldLease.Milliseconds()
			place = Place{}
			return true
		}
		w := &r.Waiting[i]
		// the waiters ahead that free slots will not take at once
		place = Place{Position: max(i+1-max(limit-len(r.Held), 0), 1)}
		// stored for a new waiter, or to renew a lease a third gone
		if w.Until >= now+WaitLease.Milliseconds()*2/3 {
			return false
		}
		w.Until = now + WaitLease.Milliseconds()
		return true
	})
	if err == nil {
		place.Moved = s.tell(scope, holder, place.Position)
	}
	return place, err
}

// tell records the place holder was told under scope (0: it holds a slot,
// nothing to remember) and reports whether it differs from the last.
func (s *Slots) tell(scope, holder string, position int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.pruned) > WaitLease {
		// waiters not heard from for a lease: let through elsewhere, or gone
		for k, t := range s.told {
			if now.Sub(t.asked) > WaitLease {
				delete(s.told, k)
			}
		}
		s.pruned = now
	}
	k := toldKey{scope, holder}
	if position == 0 {
		delete(s.told, k)
		return false
	}
	last, known := s.told[k]
	s.told[k] = toldPlace{position: position, asked: now}
	return !known || last.position != position
}

// Release frees holder's slot of scope, and takes it off the queue if it
// was waiting; releasing what is not held does nothing.
func (s *Slots) Release(ctx context.Context, scope, holder string) error {
	s.mu.Lock()
	delete(s.told, toldKey{scope, holder})
	s.mu.Unlock()
	return s.update(ctx, scope, func(r *slotRecord, _ int64) bool {
		_, held := r.Held[holder]
		delete(r.Held, holder)
		n := len(r.Waiting)
		r.Waiting = slices.DeleteFunc(r.Waiting, func(w slotWaiter) bool { return w.ID == holder })
		return held || n != len(r.Waiting)
	})
}

// Holders lists who holds a slot of scope.
func (s *Slots) Holders(ctx context.Context, scope string) ([]string, error) {
	r, _, err := s.read(ctx, scope)
	if err != nil {
		return nil, err
	}
	var out []string
	for h := range r.Held {
		out = append(out, h)
	}
	slices.Sort(out)
	return out, nil
}

func waiterOrder(a, b slotWaiter) int {
	return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.ID, b.ID))
}

func (s *Slots) read(ctx context.Context, scope string) (slotRecord, uint64, error) {
	kv, err := s.b.Open(ctx)
	if err != nil {
		return slotRecord{}, 0, fmt.Errorf("limits bucket: %w", err)
	}
	var r slotRecord
	e, err := kv.Get(ctx, scope)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return r, 0, nil
	case err != nil:
		return r, 0, fmt.Errorf("limits %s: %w", scope, err)
	}
	if len(e.Value()) > 0 {
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return r, 0, fmt.Errorf("limits %s: %w", scope, err)
		}
	}
	return r, e.Revision(), nil
}

// update applies change to scope's record (leases past their end dropped
// first) and stores it if it reports a change, again on a concurrent update.
func (s *Slots) update(ctx context.Context, scope string, change func(r *slotRecord, now int64) bool) error {
	kv, err := s.b.Open(ctx)
	if err != nil {
		return fmt.Errorf("limits bucket: %w", err)
	}
	for attempt := range 50 {
		if attempt > 0 {
			// lost a race: let the winners' updates land
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(rand.IntN(attempt*500+500)) * time.Microsecond):
			}
		}
		r, rev, err := s.read(ctx, scope)
		if err != nil {
			return err
		}
		now := s.now().UnixMilli()
		if r.Held == nil {
			r.Held = map[string]int64{}
		}
		expired := false
		for h, until := range r.Held {
			if until < now {
				delete(r.Held, h)
				expired = true
			}
		}
		n := len(r.Waiting)
		r.Waiting = slices.DeleteFunc(r.Waiting, func(w slotWaiter) bool { return w.Until != 0 && w.Until < now })
		if !change(&r, now) && !expired && n == len(r.Waiting) {
			return nil
		}
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, scope, data)
		} else {
			_, err = kv.Update(ctx, scope, data, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return fmt.Errorf("limits %s: %w", scope, err)
		}
	}
	return ErrSlotsBusy
}

// isWrongSequence is a compare-and-set that lost to another update.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Scopes of the limits Herald keeps.
func SessionsScope(tenant string) string   { return "sessions." + Token(tenant) }
func ModelCallsScope(tenant string) string { return "model_calls." + Token(tenant) }
func KeyRunsScope(keyID string) string     { return "key_runs." + Token(keyID) }
