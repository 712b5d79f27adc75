package e2e

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkUpDefaults (issue 29): a `herald up` with no flag at all, as an
// operator starts it, serving model-bound sessions all submitted at once:
// 200 sessions of 5 calls against a 200 ms model, and 1,000 sessions of 3
// calls against a 2 s model, the model in its own process. Beside each
// wall time and its ratio to the ideal (the calls of one session end to
// end), the same sessions as in-process loops on openai-go against the same
// model, after Herald's, in the same run, and cpu-floor-x-ideal: Herald's
// and the model's CPU over the machine's cores, against the ideal. Aims:
// 200 × 5 within 1.5× the ideal, 1,000 × 3 within 1.3×. Each iteration is
// one burst: x-ideal and the CPU figures are the medians over the bursts,
// first-x-ideal the first burst's (one session served before it), and
// worst-x-ideal the slowest's. HERALD_BENCH_UP_LOADS runs other loads
// instead (upLoads).
func BenchmarkUpDefaults(b *testing.B) {
	for _, c := range upLoads(b) {
		b.Run(fmt.Sprintf("%dx%d@%s", c.sessions, c.calls, c.latency), func(b *testing.B) {
			url, modelPID := startCostModelProcess(b, c.calls-1, c.latency)
			// HERALD_BENCH_UP_ARGS: flags to try against the defaults
			up := startUpProcess(b, url, 0, upOptions{args: strings.Fields(os.Getenv("HERALD_BENCH_UP_ARGS"))})
			base := newBaselineLoop(b, url, 0)
			up.run(b, "warm-up")
			base.run(b, "warm-up")
			ideal := time.Duration(c.calls) * c.latency
			b.ResetTimer()
			// each iteration is one burst; the first meets a herald up that
			// has served one session (its heap, goroutine stacks and
			// connections to the model still small), later ones a warm one
			var xIdeal, inprocX, floorX, heraldUS, modelUS []float64
			for i := 0; i < b.N; i++ {
				h0, m0, start := up.cpu(b), processCPU(b, modelPID), time.Now()
				up.batch(b, c.sessions, fmt.Sprintf("defaults %d", i))
				wall, heraldCPU, modelCPU := time.Since(start), up.cpu(b)-h0, processCPU(b, modelPID)-m0
				start = time.Now()
				var wg sync.WaitGroup
				for j := 0; j < c.sessions; j++ {
					wg.Go(func() { base.run(b, fmt.Sprintf("baseline %d/%d", i, j)) })
				}
				wg.Wait()
				inproc := time.Since(start)
				// the shortest run Herald's and the model's CPU allow on this
				// machine's cores, as a ratio to the ideal: a run near it waits
				// for the cores, not for a limit
				floor := (heraldCPU + modelCPU) / time.Duration(runtime.NumCPU())
				calls := float64(c.sessions * c.calls)
				xIdeal = append(xIdeal, wall.Seconds()/ideal.Seconds())
				inprocX = append(inprocX, inproc.Seconds()/ideal.Seconds())
				floorX = append(floorX, floor.Seconds()/ideal.Seconds())
				heraldUS = append(heraldUS, float64(heraldCPU.Microseconds())/calls)
				modelUS = append(modelUS, float64(modelCPU.Microseconds())/calls)
				b.Logf("burst %d: %.2f× ideal (in-process loops %.2f×), CPU floor %.2f×, Herald %.0f µs a call, the model %.0f µs",
					i+1, xIdeal[i], inprocX[i], floorX[i], heraldUS[i], modelUS[i])
			}
			b.ReportMetric(xIdeal[0], "first-x-ideal")
			b.ReportMetric(median(xIdeal), "x-ideal")
			b.ReportMetric(slices.Max(xIdeal), "worst-x-ideal")
			b.ReportMetric(median(inprocX), "inproc-x-ideal")
			b.ReportMetric(median(floorX), "cpu-floor-x-ideal")
			b.ReportMetric(median(heraldUS), "herald-cpu-us/call")
			b.ReportMetric(median(modelUS), "model-cpu-us/call")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// upLoad is a burst of sessions of calls each against a model answering
// after latency.
type upLoad struct {
	sessions, calls int
	latency         time.Duration
}

// upLoads are the aims' two loads, or those HERALD_BENCH_UP_LOADS names
// ("100x5@200ms 500x3@2s": sessions x calls @ the model's latency), to find
// where another machine's cores stop keeping up.
func upLoads(b *testing.B) []upLoad {
	spec := os.Getenv("HERALD_BENCH_UP_LOADS")
	if spec == "" {
		return []upLoad{{200, 5, 200 * time.Millisecond}, {1000, 3, 2 * time.Second}}
	}
	var loads []upLoad
	for _, f := range strings.Fields(spec) {
		var l upLoad
		var latency string
		if _, err := fmt.Sscanf(strings.Replace(f, "@", " ", 1), "%dx%d %s", &l.sessions, &l.calls, &latency); err != nil {
			b.Fatalf("HERALD_BENCH_UP_LOADS: %q is not sessionsxcalls@latency: %v", f, err)
		}
		d, err := time.ParseDuration(latency)
		if err != nil || l.sessions < 1 || l.calls < 2 || d <= 0 {
			b.Fatalf("HERALD_BENCH_UP_LOADS: %q needs a session or more, two calls or more and a latency", f)
		}
		l.latency = d
		loads = append(loads, l)
	}
	return loads
}

// median is the middle of xs (the mean of the two middle ones for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
