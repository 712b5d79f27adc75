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
