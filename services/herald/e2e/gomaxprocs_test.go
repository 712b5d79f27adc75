package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUpTakesProcessorsAsItsLoadNeedsThem: a `herald up` left alone runs
// Go code on one processor (no thread woken per hand-off, services/herald/
// internal/procs); sessions running at once make it take the machine's
// processors back, and it gives them up again when they are done. Seen
// from outside, in the process's own Prometheus gauge.
func TestUpTakesProcessorsAsItsLoadNeedsThem(t *testing.T) {
	all := runtime.GOMAXPROCS(0) // this machine's choice, as the child's runtime makes it
	if os.Getenv("GOMAXPROCS") != "" {
		all = runtime.NumCPU()
	}
	url := startCostModel(t, costSteps)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	up := startUpProcess(t, url, 0, upOptions{http: addr})
	procs := func() int { // 0: no answer (yet)
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_sched_gomaxprocs_threads "); ok {
				n, err := strconv.Atoi(v)
				require.NoError(t, err)
				return n
			}
		}
		require.NoError(t, sc.Err())
		t.Fatal("no go_sched_gomaxprocs_threads in /metrics")
		return 0
	}
	require.Eventually(t, func() bool { return procs() == 1 }, 30*time.Second, 50*time.Millisecond,
		"an idle herald up never went down to one processor")
	if all == 1 {
		return // one processor is all this machine has: the load below could not add one
	}

	// instant-model sessions, four at a time, until the gauge shows all
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sessions atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				up.run(t, fmt.Sprintf("load %d-%d", w, i))
				sessions.Add(1)
			}
		})
	}
	sawAll := false
	deadline := time.Now().Add(60 * time.Second)
	for !sawAll && time.Now().Before(deadline) {
		sawAll = procs() == all
	}
	stop.Store(true)
	wg.Wait()
	require.True(t, sawAll, "four sessions at once never made herald up take its %d processors", all)
	require.Positive(t, sessions.Load())

	require.Eventually(t, func() bool { return procs() == 1 }, time.Minute, 50*time.Millisecond,
		"herald up kept its processors after its sessions ended")
}
