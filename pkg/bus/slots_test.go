package bus_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// Two processes (connections) race for a limit of 3 slots, 15 holders
// each: never more than 3 hold one at once, and every holder gets its turn.
func TestSlotsHoldTheirLimitAcrossProcesses(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	var holding, most atomic.Int32
	var wg sync.WaitGroup
	for p := range 2 {
		_, js := b.Connect(t, fmt.Sprint("process-", p))
		slots := bus.NewSlots(js)
		for i := range 15 {
			wg.Go(func() {
				holder := fmt.Sprintf("p%d-h%d", p, i)
				for {
					place, err := slots.Acquire(ctx, "sessions.acme", 3, holder, int64(i))
					require.NoError(t, err)
					if place.Position == 0 {
						break
					}
					<-time.After(5 * time.Millisecond) // polls as a waiting worker does (parkRetry)
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				holding.Add(-1)
				require.NoError(t, slots.Release(ctx, "sessions.acme", holder))
			})
		}
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int32(3))
	held, err := bus.NewSlots(b.JS).Holders(ctx, "sessions.acme")
	require.NoError(t, err)
	require.Empty(t, held)
}

// Waiters are let through oldest first, each told its position when it
// changes, and a holder asking again keeps its slot.
func TestSlotsQueueWaitersInOrder(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	slots := bus.NewSlots(b.JS)
	p, err := slots.Acquire(ctx, "s", 1, "first", 10)
	require.NoError(t, err)
	require.Equal(t, 0, p.Position)
	p, err = slots.Acquire(ctx, "s", 1, "first", 10)
	require.NoError(t, err)
	require.Equal(t, 0, p.Position, "a holder asking again keeps its slot")
	third, err := slots.Acquire(ctx, "s", 1, "third", 30)
	require.NoError(t, err)
	require.Equal(t, bus.Place{Position: 1, Moved: true}, third)
	second, err := slots.Acquire(ctx, "s", 1, "second", 20)
	require.NoError(t, err)
	require.Equal(t, bus.Place{Position: 1, Moved: true}, second, "an older waiter goes first")
	third, err = slots.Acquire(ctx, "s", 1, "third", 30)
	require.NoError(t, err)
	require.Equal(t, bus.Place{Position: 2, Moved: true}, third)
	third, err = slots.Acquire(ctx, "s", 1, "third", 30)
	require.NoError(t, err)
	require.Equal(t, bus.Place{Position: 2}, third, "unchanged: nothing new to tell")
	require.NoError(t, slots.Release(ctx, "s", "first"))
	third, err = slots.Acquire(ctx, "s", 1, "third", 30)
	require.NoError(t, err)
	require.Equal(t, bus.Place{Position: 1, Moved: true}, third, "the slot is second's, who is ahead")
	second, err = slots.Acquire(ctx, "s", 1, "second", 20)
	require.NoError(t, err)
	require.Equal(t, 0, second.Position)
}

// A slot freed moves every waiter up one place, and each waiter asking
// again is told its new place, but the shared record is written only for
// the slot changing hands, not once per waiter: the record holds every
// waiter, so a write per waiter made each release cost as many writes as
// there were waiters, each of the whole queue. Before, 100 waiters asking
// again after a release wrote the record 100 times.
func TestWaitersMovingUpDoNotRewriteTheRecord(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	slots := bus.NewSlots(b.JS)
	const waiters = 100
	p, err := slots.Acquire(ctx, "s", 1, "holder", 0)
	require.NoError(t, err)
	require.Equal(t, 0, p.Position)
	for i := range waiters {
		p, err := slots.Acquire(ctx, "s", 1, fmt.Sprint("w", i), int64(i+1))
		require.NoError(t, err)
		require.Equal(t, bus.Place{Position: i + 1, Moved: true}, p)
	}
	kv, err := b.JS.KeyValue(ctx, bus.BucketLimits)
	require.NoError(t, err)
	revision := func() uint64 {
		e, err := kv.Get(ctx, "s")
		require.NoError(t, err)
		return e.Revision()
	}
	before := revision()
	require.NoError(t, slots.Release(ctx, "s", "holder"))
	// another process's Slots: what it was told is its own
	other := bus.NewSlots(b.JS)
	for i := range waiters {
		s := slots
		if i%2 == 1 {
			s = other
		}
		p, err := s.Acquire(ctx, "s", 1, fmt.Sprint("w", i), int64(i+1))
		require.NoError(t, err)
		require.Equal(t, i, p.Position, "w%d's place", i)
		require.True(t, p.Position == 0 || p.Moved, "w%d is told it moved up", i)
	}
	writes := revision() - before
	t.Logf("%d waiters moving up one place wrote the record %d times", waiters, writes)
	require.LessOrEqual(t, writes, uint64(2), "the release and the slot taken, nothing per waiter")
	for i := 2; i < waiters; i += 2 {
		p, err := slots.Acquire(ctx, "s", 1, fmt.Sprint("w", i), int64(i+1))
		require.NoError(t, err)
		require.Equal(t, bus.Place{Position: i}, p, "w%d asking again: nothing new to tell", i)
	}
	require.Equal(t, before+writes, revision(), "asking again without moving writes nothing")
}
