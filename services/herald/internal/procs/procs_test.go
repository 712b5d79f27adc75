package procs

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeRuntime stands for GOMAXPROCS: its own choice is top.
type fakeRuntime struct {
	top, procs int
	sets       []int
}

func (f *fakeRuntime) apply(n int) int {
	switch {
	case n == 0:
		f.procs = f.top
	case n > 0:
		f.procs = n
	}
	if n >= 0 {
		f.sets = append(f.sets, f.procs)
	}
	return f.procs
}

func TestControllerTriesHalfTheProcessorsAndDoublesThemWhenGoroutinesCrowd(t *testing.T) {
	rt := &fakeRuntime{top: 4, procs: 4}
	start := time.Unix(0, 0)
	c := newController(nil, rt.apply, start)
	at := start
	next := func(load float64) int {
		at = at.Add(window)
		c.look(at, load)
		return rt.procs
	}
	quiet, busy := 1.0, 2.0*crowded

	// at the runtime's choice, waits are threads being woken: no change
	// before the first trial, crowded or not
	for range 9 {
		require.Equal(t, 4, next(busy))
	}
	require.Equal(t, 2, next(quiet), "a second in, the first trial halves")
	require.Equal(t, 2, next(quiet), "a quiet window confirms it")
	for range 9 {
		require.Equal(t, 2, next(quiet))
	}
	require.Equal(t, 1, next(quiet), "a second later the next trial halves again")
	require.Equal(t, 1, next(busy), "crowded once on one: a burst, maybe")
	require.Equal(t, 2, next(busy), "crowded twice: back to two")
	require.Equal(t, 4, next(busy), "still crowded: back to the runtime's choice")
	// the failed trial doubled the wait before the next one: two seconds
	for range 19 {
		require.Equal(t, 4, next(quiet))
	}
	require.Equal(t, 2, next(quiet))
	require.Equal(t, []int{2, 1, 2, 4, 2}, rt.sets, "every change, the return to the runtime's choice as 4")
}

func TestControllerFollowsTheRuntimesOwnChoice(t *testing.T) {
	rt := &fakeRuntime{top: 4, procs: 4}
	start := time.Unix(0, 0)
	c := newController(nil, rt.apply, start)
	// a cgroup limit lowered to 2 while at the runtime's choice
	rt.top, rt.procs = 2, 2
	c.look(start.Add(firstTrial), 0)
	require.Equal(t, 1, rt.procs, "the trial halves what the runtime chose now")
	rt.top = 3
	c.look(start.Add(firstTrial+window), 2.0*crowded)
	c.look(start.Add(firstTrial+2*window), 2.0*crowded)
	require.Equal(t, 3, rt.procs, "doubled to the choice last seen, 2, is the runtime's choice: 3 by now")
	require.Equal(t, []int{1, 3}, rt.sets)
}

// TestWaitedIsTheTimeGoroutinesWaitForAProcessor reads the runtime's
// scheduler as the controller does: on one processor, four goroutines that
// take turns (a short spin, then yield) each wait about three quarters of
// the time; a goroutine that sleeps hardly waits. Turns rather than
// preemption, so that the runtime, which records one scheduling in eight,
// has thousands to sample.
func TestWaitedIsTheTimeGoroutinesWaitForAProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s, ok := newSched()
	require.True(t, ok, "this runtime reports /sched/latencies")

	end := time.Now().Add(400 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for now := time.Now(); now.Before(end); now = time.Now() {
				for turn := now.Add(50 * time.Microsecond); time.Now().Before(turn); {
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	waited := s.waited()
	// 3 × 0.4 s in all; the runtime records one scheduling in eight
	require.Greater(t, waited, 0.3, "waited %.2fs", waited)
	require.Less(t, waited, 4.0, "waited %.2fs", waited)

	idle := time.NewTicker(5 * time.Millisecond) // a goroutine woken now and then
	for range 20 {
		<-idle.C
	}
	idle.Stop()
	require.Less(t, s.waited(), 0.05, "a sleeping goroutine hardly waits")
}
