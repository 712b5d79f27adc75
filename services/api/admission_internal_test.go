package api

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// TestAdmissionHoldsItsLimitsUnderConcurrency hammers admit, release and
// withdraw from many goroutines: no more runs of a tenant or key ever hold
// a slot than its limit allows, and every waiter is admitted in the end.
func TestAdmissionHoldsItsLimitsUnderConcurrency(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newAdmission(false, map[string]int{"acme": 3}, 0, bus.NewSlots(heraldtest.StartBus(t).JS))
	a.start(ctx)
	var mu sync.Mutex
	holding := map[string]int{}
	check := func(tenant, key string, delta int) {
		mu.Lock()
		defer mu.Unlock()
		holding["t:"+tenant] += delta
		holding["k:"+key] += delta
		require.LessOrEqual(t, holding["t:acme"], 3)
		require.LessOrEqual(t, holding["k:k1"], 2)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"k1", "k2"}[i%2]
			limit := map[string]int{"k1": 2, "k2": 0}[key]
			tk := ticket{runID: fmt.Sprint("r", i), keyID: key, keyLimit: limit, tenant: "acme"}
			_, ready, err := a.admit(tk)
			require.NoError(t, err)
			if ready != nil {
				<-ready
			}
			check(tk.tenant, key, 1)
			check(tk.tenant, key, -1)
			a.release(tk.runID)
		}()
	}
	wg.Wait()
	require.Empty(t, a.activeRuns())
	// the admission loop may still be tidying its queue: read it under its lock
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.queue) == 0
	}, 10*time.Second, 10*time.Millisecond, "no run is left waiting")
}

// TestWithdrawnWaiterIsToldAtOnce: whoever waits on a queued run learns it
// was withdrawn (not admitted) when it is cancelled, instead of waiting
// for a slot that will never come.
func TestWithdrawnWaiterIsToldAtOnce(t *testing.T) {
	a := newAdmission(false, map[string]int{"acme": 1}, 0, bus.NewSlots(heraldtest.StartBus(t).JS))
	pos, _, err := a.admit(ticket{runID: "first", tenant: "acme"})
	require.NoError(t, err)
	require.Zero(t, pos)
	pos, ready, err := a.admit(ticket{runID: "second", tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, 1, pos)
	require.True(t, a.withdraw("second"))
	select {
	case admitted := <-ready:
		require.False(t, admitted)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter of a withdrawn run is never told")
	}
	require.False(t, a.withdraw("second"), "withdrawn once")
}
