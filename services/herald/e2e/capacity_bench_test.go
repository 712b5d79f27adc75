package e2e

import (
	"fmt"
	"os"
	"runtime"
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
// 200 × 5 within 1.5× the ideal, 1,000 × 3 within 1.3×.
func BenchmarkUpDefaults(b *testing.B) {
	for _, c := range []struct {
		sessions, calls int
		latency         time.Duration
	}{{200, 5, 200 * time.Millisecond}, {1000, 3, 2 * time.Second}} {
		b.Run(fmt.Sprintf("%dx%d@%s", c.sessions, c.calls, c.latency), func(b *testing.B) {
			url, modelPID := startCostModelProcess(b, c.calls-1, c.latency)
			// HERALD_BENCH_UP_ARGS: flags to try against the defaults
			up := startUpProcess(b, url, 0, upOptions{args: strings.Fields(os.Getenv("HERALD_BENCH_UP_ARGS"))})
			base := newBaselineLoop(b, url, 0)
			up.run(b, "warm-up")
			base.run(b, "warm-up")
			ideal := time.Duration(c.calls) * c.latency
			b.ResetTimer()
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
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(wall.Seconds()/ideal.Seconds(), "x-ideal")
				b.ReportMetric(inproc.Seconds(), "inproc-wall-s")
				b.ReportMetric(inproc.Seconds()/ideal.Seconds(), "inproc-x-ideal")
				// the shortest run Herald's and the model's CPU allow on this
				// machine's cores, as a ratio to the ideal: a run near it waits
				// for the cores, not for a limit
				floor := (heraldCPU + modelCPU) / time.Duration(runtime.NumCPU())
				b.ReportMetric(floor.Seconds()/ideal.Seconds(), "cpu-floor-x-ideal")
				b.ReportMetric(heraldCPU.Seconds(), "herald-cpu-s")
				calls := float64(c.sessions * c.calls)
				b.ReportMetric(float64(heraldCPU.Microseconds())/calls, "herald-cpu-us/call")
				b.ReportMetric(float64(modelCPU.Microseconds())/calls, "model-cpu-us/call")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
