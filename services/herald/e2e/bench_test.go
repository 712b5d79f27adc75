package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// stepScript calls read_file until the history holds steps assistant
// messages, then answers: a zero-latency model driving one tool per step.
func stepScript(steps int) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		if n := r.AssistantCount(); n < steps {
			// distinct arguments each step, so repeat detection stays quiet
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"data.txt","limit":%d}`, n+1))
		}
		return scripted.Text("done")
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func report(b *testing.B, d []time.Duration) {
	b.ReportMetric(float64(percentile(d, 0.5).Microseconds()), "p50-µs/step")
	b.ReportMetric(float64(percentile(d, 0.99).Microseconds()), "p99-µs/step")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStepThroughBus measures one agent step — a model call and a tool
// call — through the real services and JetStream: the interval between
// consecutive THINKING events of 10-step sessions (b.N sessions).
func BenchmarkStepThroughBus(b *testing.B) {
	const steps = 10
	h := Start(b, stepScript(steps))
	require.NoError(b, os.WriteFile(filepath.Join(h.Workspace, "data.txt"), []byte("some data\n"), 0o644))
	var all []time.Duration
	for i := 0; i < b.N; i++ {
		task := NewTask(fmt.Sprintf("benchmark run %d", i))
		task.MaxIterations = steps + 1
		stop := watchThinking(b, h.NC, task.SessionID)
		res := h.Run(task)
		require.Equal(b, proto.ExitTextResponse, res.ExitReason)
		all = append(all, stop()...)
	}
	report(b, all)
}

// BenchmarkStepInProcess is the baseline: the same model call (same growing
// history, same HTTP server) and the same file read, called directly.
func BenchmarkStepInProcess(b *testing.B) {
	const steps = 10
	model, err := scripted.Start(stepScript(steps))
	require.NoError(b, err)
	defer model.Close()
	dir := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(dir, "data.txt"), []byte("some data\n"), 0o644))
	client := &http.Client{}
	var all []time.Duration
	for i := 0; i < b.N; i++ {
		msgs := []map[string]any{{"role": "system", "content": "You are a benchmark."}, {"role": "user", "content": fmt.Sprintf("baseline run %d", i)}}
		for s := 0; s < steps; s++ {
			start := time.Now()
			body, _ := json.Marshal(map[string]any{"model": "test-model", "messages": msgs, "stream": true})
			resp, err := client.Post(model.URL+"/chat/completions", "application/json", bytes.NewReader(body))
			require.NoError(b, err)
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			data, err := os.ReadFile(filepath.Join(dir, "data.txt"))
			require.NoError(b, err)
			id := fmt.Sprintf("call_%d", s)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": "read_file", "arguments": `{"path":"data.txt"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": "1|" + string(data)})
			all = append(all, time.Since(start))
		}
	}
	report(b, all)
}

// BenchmarkConcurrentSessions runs many sessions at once against a model
// that takes 200 ms per call — 200 sessions of 5 calls (4 tool steps, then
// the answer; ideal 1 s) and 1,000 of 10 (ideal 2 s) — and the same number
// of in-process loops against the same model in the same run. Figures: wall
// time, its ratio to the ideal, and the in-process loops' wall time; and, for
// each side, this process's CPU (user + system: the services, their NATS
// server and the model for Herald; the loops and the model for the baseline)
// per model call and as cores kept busy on average (CPU / wall), which says
// whether the run was bound by the machine's cores rather than by waiting.
func BenchmarkConcurrentSessions(b *testing.B) {
	const latency = 200 * time.Millisecond
	for _, c := range []struct{ sessions, calls int }{{200, 5}, {1000, 10}} {
		b.Run(fmt.Sprintf("%dx%d", c.sessions, c.calls), func(b *testing.B) {
			steps := c.calls - 1
			h := Start(b, delayed(stepScript(steps), latency), WithConcurrency(1024), WithConfig(func(c *config.Config) { c.Tenant = "bench" }))
			h.StopEventLog()
			require.NoError(b, os.WriteFile(filepath.Join(h.Workspace, "data.txt"), []byte("some data\n"), 0o644))
			base := newBaselineLoop(b, h.Model.URL, 0)
			ideal := time.Duration(c.calls) * latency
			for i := 0; i < b.N; i++ {
				tasks := make([]proto.Task, c.sessions)
				start, cpu := time.Now(), cpuTime()
				for j := range tasks {
					tasks[j] = NewTask(fmt.Sprintf("concurrent %d/%d", i, j))
					tasks[j].MaxIterations = steps + 1
					h.Submit(tasks[j])
				}
				for _, task := range tasks {
					res := h.WaitResult(task, 10*time.Minute)
					require.Equal(b, proto.ExitTextResponse, res.ExitReason)
				}
				wall, heraldCPU := time.Since(start), cpuTime()-cpu
				start, cpu = time.Now(), cpuTime()
				var wg sync.WaitGroup
				for j := 0; j < c.sessions; j++ {
					wg.Go(func() { base.run(b, fmt.Sprintf("baseline %d/%d", i, j)) })
				}
				wg.Wait()
				inproc, inprocCPU := time.Since(start), cpuTime()-cpu
				calls := float64(c.sessions * c.calls)
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(wall.Seconds()/ideal.Seconds(), "x-ideal")
				b.ReportMetric(inproc.Seconds(), "inproc-wall-s")
				b.ReportMetric(float64(heraldCPU.Microseconds())/calls, "herald-cpu-µs/call")
				b.ReportMetric(float64(inprocCPU.Microseconds())/calls, "inproc-cpu-µs/call")
				b.ReportMetric(heraldCPU.Seconds()/wall.Seconds(), "herald-cores")
				b.ReportMetric(inprocCPU.Seconds()/inproc.Seconds(), "inproc-cores")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// watchThinking records when a session enters THINKING; the func it returns
// stops watching and gives the intervals between consecutive entries (one
// per step after the first).
func watchThinking(b *testing.B, nc *nats.Conn, sid string) func() []time.Duration {
	var mu sync.Mutex
	var stamps []time.Time
	sub, err := nc.Subscribe(bus.SessionEvents(sid), func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == proto.EventState && ev.State == proto.StateThinking {
			mu.Lock()
			stamps = append(stamps, time.Now())
			mu.Unlock()
		}
	})
	require.NoError(b, err)
	return func() []time.Duration {
		require.NoError(b, sub.Unsubscribe())
		mu.Lock()
		defer mu.Unlock()
		var out []time.Duration
		for j := 1; j < len(stamps); j++ {
			out = append(out, stamps[j].Sub(stamps[j-1]))
		}
		return out
	}
}
