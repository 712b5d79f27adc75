package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// Settings of BenchmarkSustainedLoad (environment variables).
const (
	loadSessionsEnv = "HERALD_LOAD_SESSIONS"    // concurrent sessions, default 1000
	loadDurationEnv = "HERALD_LOAD_DURATION"    // how long new sessions keep starting, default 30s
	loadLatencyEnv  = "HERALD_LOAD_LATENCY"     // model latency per call, default 200ms
	loadProfileEnv  = "HERALD_LOAD_HEAPPROFILE" // file to write the settled heap profile to
	// loadModelEnv makes this test binary a model server (see init): the
	// scripted model records every request it serves, so it runs in its own
	// process to keep its memory out of the heap being measured.
	loadModelEnv = "HERALD_LOAD_MODEL_CHILD"
)

// loadSteps is the shape of one load session: two tool steps, then the answer.
const loadSteps = 2

func loadScript(latency time.Duration) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		reply := scripted.Text("done")
		if n := r.AssistantCount(); n < loadSteps {
			reply = scripted.Tool("read_file", fmt.Sprintf(`{"path":"data.txt","limit":%d}`, n+1))
		}
		reply.Delay = latency
		return reply
	}
}

func init() {
	if os.Getenv(loadModelEnv) == "" {
		return
	}
	latency, err := time.ParseDuration(os.Getenv(loadLatencyEnv))
	if err != nil {
		panic(err)
	}
	model, err := scripted.Start(loadScript(latency))
	if err != nil {
		panic(err)
	}
	fmt.Println("MODEL_URL=" + model.URL)
	select {} // until the benchmark kills this process
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// startModelProcess runs the load model in a child process.
func startModelProcess(b *testing.B, latency time.Duration) string {
	url, _ := startModelChild(b, loadModelEnv+"=1", loadLatencyEnv+"="+latency.String())
	return url
}

type heapFigures struct {
	heapMB     float64
	goroutines int
}

func measureHeap() heapFigures {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapFigures{heapMB: float64(ms.HeapAlloc) / (1 << 20), goroutines: runtime.NumGoroutine()}
}

// BenchmarkSustainedLoad keeps HERALD_LOAD_SESSIONS sessions (default
// 1,000) running at once for HERALD_LOAD_DURATION (default 30s; use e.g.
// 5m for the full figure): each session makes three model calls against
// the scripted model (latency HERALD_LOAD_LATENCY, default 200 ms) and two
// read_file calls, and a new one starts as soon as one finishes. All
// services and the NATS server run in this process; the model runs in a
// child process. Reported: sessions and steps completed, step overhead
// (the interval between consecutive THINKING events less the model's
// latency) p50/p99, and heap and goroutines before and after, once the
// load has ended and the process settled. It fails if any session does not
// finish with its answer, or if goroutines do not return to their count
// before the load.
func BenchmarkSustainedLoad(b *testing.B) {
	sessions := envInt(loadSessionsEnv, 1000)
	duration := envDuration(loadDurationEnv, 30*time.Second)
	latency := envDuration(loadLatencyEnv, 200*time.Millisecond)
	modelURL := startModelProcess(b, latency)
	h := Start(b, loadScript(latency), WithToolConcurrency(256), WithConfig(func(c *config.Config) {
		c.Tenant = "load"
		c.Primary.BaseURL = modelURL
	}))
	require.NoError(b, os.WriteFile(filepath.Join(h.Workspace, "data.txt"), []byte("some data\nmore data\n"), 0o644))

	var waiters sync.Map // session id -> chan proto.Result
	sub, err := h.NC.Subscribe("herald.session.*.result", func(m *nats.Msg) {
		var res proto.Result
		if json.Unmarshal(m.Data, &res) != nil {
			return
		}
		if ch, ok := waiters.LoadAndDelete(res.SessionID); ok {
			ch.(chan proto.Result) <- res
		}
	})
	require.NoError(b, err)
	defer sub.Unsubscribe()

	var mu sync.Mutex
	var overheads []time.Duration
	var failures []string
	var completed, steps atomic.Int64
	runSession := func(prompt string) {
		task := NewTask(prompt)
		task.MaxIterations = loadSteps + 2
		ch := make(chan proto.Result, 1)
		waiters.Store(task.SessionID, ch)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := bus.PublishJSON(ctx, h.JS, bus.TasksSubject, task.TaskID, task)
		cancel()
		var res proto.Result
		if err == nil {
			select {
			case res = <-ch:
			case <-time.After(5 * time.Minute):
				err = fmt.Errorf("no result in 5 minutes")
			}
		}
		waiters.Delete(task.SessionID)
		h.mu.Lock()
		events := h.events[task.SessionID]
		delete(h.events, task.SessionID)
		h.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s: %v", task.SessionID, err))
			return
		case res.ExitReason != proto.ExitTextResponse || res.FinalResponse != "done":
			failures = append(failures, fmt.Sprintf("%s: %s %q %s", task.SessionID, res.ExitReason, res.FinalResponse, res.Error))
			return
		}
		completed.Add(1)
		var last time.Time
		for _, ev := range events {
			if ev.Type != proto.EventState || ev.State != proto.StateThinking {
				continue
			}
			ts, err := time.Parse(time.RFC3339Nano, ev.TS)
			if err != nil {
				continue
			}
			if !last.IsZero() {
				overheads = append(overheads, ts.Sub(last)-latency)
				steps.Add(1)
			}
			last = ts
		}
	}

	// Warm up (connections, consumers, pools), then take the baseline.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { runSession(fmt.Sprintf("warm-up %d", i)) })
	}
	wg.Wait()
	require.Empty(b, failures, "warm-up sessions")
	overheads = nil
	completed.Store(0)
	steps.Store(0)
	before := measureHeap()

	b.ResetTimer()
	start := time.Now()
	deadline := start.Add(duration)
	for w := range sessions {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				runSession(fmt.Sprintf("load %d-%d", w, n))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	require.Empty(b, failures, "every session finishes with its answer")

	// The harness's event log and this benchmark's figures are not Herald's.
	h.mu.Lock()
	h.events = map[string][]proto.Event{}
	h.mu.Unlock()
	// Settled: wait (bounded) for goroutines to return to the baseline; the
	// gateway's idle HTTP connections to the model close after 90 s.
	slack := 50
	var after heapFigures
	settled := time.Now()
	require.Eventually(b, func() bool {
		after = measureHeap()
		return after.goroutines <= before.goroutines+slack
	}, 2*time.Minute, time.Second, "goroutines went from %d to %d after the load", before.goroutines, after.goroutines)

	if path := os.Getenv(loadProfileEnv); path != "" {
		f, err := os.Create(path)
		require.NoError(b, err)
		require.NoError(b, pprof.WriteHeapProfile(f))
		require.NoError(b, f.Close())
	}
	b.ReportMetric(float64(completed.Load()), "sessions")
	b.ReportMetric(float64(completed.Load())/wall.Seconds(), "sessions/s")
	b.ReportMetric(float64(steps.Load())/wall.Seconds(), "steps/s")
	b.ReportMetric(float64(percentile(overheads, 0.5).Milliseconds()), "p50-overhead-ms/step")
	b.ReportMetric(float64(percentile(overheads, 0.99).Milliseconds()), "p99-overhead-ms/step")
	b.ReportMetric(before.heapMB, "heap-before-MB")
	b.ReportMetric(after.heapMB, "heap-after-MB")
	b.ReportMetric(float64(before.goroutines), "goroutines-before")
	b.ReportMetric(float64(after.goroutines), "goroutines-after")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d concurrent sessions for %s (latency %s): %d sessions, %d steps in %s; step overhead p50 %s p99 %s; heap %.1f -> %.1f MB, goroutines %d -> %d (settled in %s)",
		sessions, duration, latency, completed.Load(), steps.Load(), wall.Round(time.Millisecond),
		percentile(overheads, 0.5), percentile(overheads, 0.99), before.heapMB, after.heapMB,
		before.goroutines, after.goroutines, time.Since(settled).Round(time.Second))
}
