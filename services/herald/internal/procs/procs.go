// Package procs sizes the process's GOMAXPROCS to its load.
//
// A Herald process passes its work from goroutine to goroutine (client,
// server, stream, consumer, handler). With processors idle, every hand-off
// wakes another thread, which spins looking for work and sleeps again: on a
// lightly loaded machine that is a fifth of the process's CPU, and it buys
// no speed, since one session's work is a chain, not parallel. So the
// process tries fewer processors and keeps them for as long as its
// goroutines hardly wait for one, and takes more as soon as they do
// (docs/ARCHITECTURE.md, "Processors sized to the load").
package procs

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"time"
)

const (
	// window is how often the controller looks at the scheduler.
	window = 100 * time.Millisecond
	// crowded is how many goroutines, on average over a window, may wait
	// ready to run and not running before the process takes more
	// processors, when two windows in a row say so. On one processor, with
	// an instant model (p10–p90 of 100 ms windows): one session 3.0–4.1,
	// where one processor is the faster (a batch 50 ms against 53 on two);
	// four sessions 3.4–6.3 (p50 5.2), where two are (87 ms against 77).
	// One window alone was too noisy a sign: one session crossed 3 often
	// enough to be held on two processors, 0.2 ms slower a step.
	crowded = 4.5
	// sampled: the runtime records the wait of one scheduling in eight
	// (gTrackingPeriod in runtime/proc.go).
	sampled = 8
	// firstTrial and lastTrial bound how long the process keeps a count of
	// processors before it tries half as many.
	firstTrial = time.Second
	lastTrial  = time.Minute
)

// Start sizes GOMAXPROCS until ctx ends, then gives the runtime back its
// own choice. It does nothing where the operator set GOMAXPROCS, where the
// process has one processor anyway or where the runtime does not report
// how long goroutines wait.
func Start(ctx context.Context) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	s, ok := newSched()
	if !ok {
		return
	}
	c := newController(s.waited, setProcs, time.Now())
	go c.run(ctx)
}

// controller halves the processors on trial and doubles them when
// goroutines crowd; a trial that fails makes the next one wait twice as
// long.
type controller struct {
	waited  func() float64 // seconds goroutines waited since the last call, summed
	apply   func(n int) int
	procs   int           // the count now
	atMost  bool          // procs is the runtime's own choice: the CPUs, or the cgroup's limit
	top     int           // that choice when last seen
	trialAt time.Time     // when to try half the processors
	gap     time.Duration // how long after a change the next trial waits
	trial   bool          // the count was set by a trial not yet confirmed
	// crowding: the previous window was crowded too
	crowding bool
}

// newController starts at the runtime's choice. apply(n) sets n processors
// (0: the runtime's choice, -1: none, only read) and returns the count.
func newController(waited func() float64, apply func(n int) int, now time.Time) *controller {
	c := &controller{waited: waited, apply: apply, atMost: true, gap: firstTrial}
	c.procs = apply(-1)
	c.top = c.procs
	c.trialAt = now.Add(c.gap)
	return c
}

// setProcs is the runtime's side of controller.apply. The runtime's own
// choice follows a changed cgroup limit by itself, a count set does not.
func setProcs(n int) int {
	switch {
	case n == 0:
		runtime.SetDefaultGOMAXPROCS()
	case n > 0:
		runtime.GOMAXPROCS(n)
	}
	return runtime.GOMAXPROCS(0)
}

func (c *controller) run(ctx context.Context) {
	t := time.NewTicker(window)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			c.apply(0)
			return
		case now := <-t.C:
			c.look(now, c.waited()/now.Sub(last).Seconds())
			last = now
		}
	}
}

// look adjusts the processors to load: how many goroutines waited for a
// processor, on average, over the window that ends now.
func (c *controller) look(now time.Time, load float64) {
	if c.atMost {
		c.procs = c.apply(-1) // the runtime may have changed it
		c.top = c.procs
	}
	over := load > crowded
	twice := over && c.crowding
	c.crowding = over
	switch {
	case over && !twice && !c.atMost:
		// once may be a burst: the next window decides
	case twice && !c.atMost:
		// (at the runtime's choice, waits are mostly threads being woken)
		if c.trial {
			c.gap = min(2*c.gap, lastTrial)
		}
		c.trial = false
		c.trialAt = now.Add(c.gap)
		c.double()
	case c.trial:
		c.trial = false // a window without crowding: the count holds
		c.gap = firstTrial
		c.trialAt = now.Add(c.gap)
	case c.procs > 1 && !now.Before(c.trialAt):
		c.trial = true
		c.atMost = false
		c.procs = c.apply(c.procs / 2)
	}
}

// double doubles the processors, up to the runtime's choice.
func (c *controller) double() {
	switch {
	case c.atMost:
	case 2*c.procs >= c.top:
		c.atMost = true
		c.procs = c.apply(0)
		c.top = c.procs
	default:
		c.procs = c.apply(2 * c.procs)
	}
}

// sched reads how long goroutines waited to run (/sched/latencies).
type sched struct {
	samples []metrics.Sample
	last    []uint64
}

func newSched() (*sched, bool) {
	s := &sched{samples: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
	metrics.Read(s.samples)
	if s.samples[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil, false
	}
	s.last = append([]uint64(nil), s.samples[0].Value.Float64Histogram().Counts...)
	return s, true
}

// waited returns the seconds goroutines spent ready to run and not running
// since the previous call, summed over goroutines; each wait recorded
// counts as the middle of its histogram bucket, sampled times.
func (s *sched) waited() float64 {
	metrics.Read(s.samples)
	h := s.samples[0].Value.Float64Histogram()
	var sum float64
	for i, n := range h.Counts {
		if d := n - s.last[i]; d > 0 {
			sum += float64(d) * middle(h.Buckets[i], h.Buckets[i+1])
		}
		s.last[i] = n
	}
	return sampled * sum
}

// middle is a bucket's middle, or its finite edge where the other is not.
func middle(lo, hi float64) float64 {
	switch {
	case math.IsInf(lo, -1) || lo < 0:
		return max(hi, 0)
	case math.IsInf(hi, 1):
		return lo
	}
	return (lo + hi) / 2
}
