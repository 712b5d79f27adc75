package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// BenchmarkStepCPUProcess is BenchmarkStepCPU measured as the issue puts it:
// the sessions are served by a `herald up` process (the built binary, every
// service and the embedded JetStream), whose CPU is read from the operating
// system (/proc/<pid>/stat: user + system of all its threads, in clock
// ticks), beside the in-process loop in this test process against the same
// model (its own process). Apart, neither process's garbage collection can
// be charged to the other.
func BenchmarkStepCPUProcess(b *testing.B) {
	for _, c := range costHistories {
		b.Run(c.name, func(b *testing.B) {
			url := startCostModel(b, costSteps)
			up := startUpProcess(b, url, c.size, upOptions{})
			base := newBaselineLoop(b, url, c.size)
			up.settle(b)
			base.run(b, "warm-up")
			var herald, inproc time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := up.cpu(b)
				up.run(b, fmt.Sprintf("herald %d", i))
				t1, s1 := up.cpu(b), cpuTime()
				base.run(b, fmt.Sprintf("baseline %d", i))
				herald += t1 - t0
				inproc += cpuTime() - s1
			}
			steps := float64(b.N * (costSteps + 1))
			b.ReportMetric(float64(herald.Microseconds())/steps, "herald-cpu-µs/step")
			b.ReportMetric(float64(inproc.Microseconds())/steps, "inproc-cpu-µs/step")
			b.ReportMetric(float64(herald)/float64(inproc), "x-inproc")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// upProcess is a `herald up` child serving the cost sessions.
type upProcess struct {
	pid int
	nc  *nats.Conn
	js  jetstream.JetStream
}

// upOptions: the dashboard's (and /metrics') address, none if empty, more
// environment for the process and more flags.
type upOptions struct {
	http string
	env  map[string]string
	args []string
	// yaml is added to the process's herald.yaml.
	yaml string
}

// startUpProcess starts `herald up` against the model at modelURL.
func startUpProcess(b testing.TB, modelURL string, size int, o upOptions) *upProcess {
	data := b.TempDir()
	ws := filepath.Join(data, "workspace")
	require.NoError(b, os.MkdirAll(ws, 0o755))
	writeCostFiles(b, ws, size)
	// as startCostHarness: no compression, room for a 1 MB history and a
	// 1 MB tool result
	cfg := "compression: {enabled: false}\ncontext_windows: {test-model: 100000000}\n" +
		"tool_output: {max_result_chars: 2097152, read_file_max_lines: 100000}\n" +
		"pricing: {test-model: {input: 1, output: 2}}\n" + o.yaml
	require.NoError(b, os.WriteFile(filepath.Join(data, "herald.yaml"), []byte(cfg), 0o644))
	port := freePort(b)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	env := map[string]string{"HERALD_BASE_URL": modelURL, "HERALD_MODEL": "test-model", "HERALD_NATS_URL": url,
		"HERALD_CONFIG": filepath.Join(data, "herald.yaml"), "HERALD_LOG_LEVEL": "warn",
		// no clickhouse-server on PATH: usage waits in its stream, no private ClickHouse
		"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for k, v := range o.env {
		env[k] = v
	}
	// HERALD_BENCH_UP_ENV: "K=V K=V", environment to try against the defaults
	for _, kv := range strings.Fields(os.Getenv("HERALD_BENCH_UP_ENV")) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if prefix := os.Getenv("HERALD_BENCH_UP_CPUPROFILE"); prefix != "" {
		// a profile of the whole `herald up` process, one file per history size
		env["HERALD_CPUPROFILE"] = fmt.Sprintf("%s.%d", prefix, size)
	}
	var stderr heraldtest.SyncBuffer
	args := append([]string{"up", "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", data, "--http", o.http}, o.args...)
	cmd := heraldCmd(b, ctx, data, env, args...)
	cmd.Stderr = &stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	up := &upProcess{pid: cmd.Process.Pid}
	var err error
	require.Eventually(b, func() bool {
		up.nc, err = nats.Connect(url)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "herald up never listened: %s", stderr.String())
	b.Cleanup(up.nc.Close)
	up.js, err = jetstream.New(up.nc)
	require.NoError(b, err)
	require.Eventually(b, func() bool {
		_, err := up.js.Stream(ctx, bus.StreamTasks)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	return up
}

// run submits one cost session and waits for its answer.
func (u *upProcess) run(b testing.TB, prompt string) { u.runTask(b, NewTask(prompt)) }

// runTask submits task as a cost session and waits for its answer.
func (u *upProcess) runTask(b testing.TB, task proto.Task) {
	task.MaxIterations = costSteps + 1
	sub, err := u.nc.SubscribeSync(bus.SessionResult(task.SessionID))
	require.NoError(b, err)
	defer func() { _ = sub.Unsubscribe() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(b, bus.PublishJSON(ctx, u.js, bus.TasksSubject, "", task))
	msg, err := sub.NextMsg(2 * time.Minute)
	require.NoError(b, err)
	var res proto.Result
	require.NoError(b, json.Unmarshal(msg.Data, &res))
	require.Equal(b, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(b, "done", res.FinalResponse)
}

// settle runs sessions for 2 s: a `herald up` runs for hours, so it is
// measured settled, past its first trial of fewer processors
// (internal/procs).
func (u *upProcess) settle(b testing.TB) {
	for start := time.Now(); time.Since(start) < 2*time.Second; {
		u.run(b, "warm-up")
	}
}

// cpu is the process's user + system time so far.
func (u *upProcess) cpu(b testing.TB) time.Duration { return processCPU(b, u.pid) }

// processCPU is the user + system time so far of the process pid.
func processCPU(b testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// fields after the command name, which is in parentheses: state is 3,
	// utime 14 and stime 15 (proc(5))
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, err := strconv.ParseInt(f[11], 10, 64)
	require.NoError(b, err)
	stime, err := strconv.ParseInt(f[12], 10, 64)
	require.NoError(b, err)
	const ticks = 100 // sysconf(_SC_CLK_TCK) on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// BenchmarkUpProcessors: batches of sessions at once (instant model)
// through two `herald up` processes, one sizing its processors to its load
// (internal/procs) and one with GOMAXPROCS set to the machine's count,
// which turns the sizing off; the batches alternate between the two. Wall
// time per batch and CPU per step of each, and their ratios.
func BenchmarkUpProcessors(b *testing.B) {
	url := startCostModel(b, costSteps)
	sized := startUpProcess(b, url, 0, upOptions{})
	fixed := startUpProcess(b, url, 0, upOptions{env: map[string]string{"GOMAXPROCS": strconv.Itoa(runtime.NumCPU())}})
	sized.settle(b)
	fixed.settle(b)
	for _, n := range []int{1, 4, 32} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			var wall, cpu [2]time.Duration
			for i := 0; i < b.N; i++ {
				for k, up := range []*upProcess{sized, fixed} {
					c0, t0 := up.cpu(b), time.Now()
					up.batch(b, n, fmt.Sprintf("batch %d", i))
					wall[k] += time.Since(t0)
					cpu[k] += up.cpu(b) - c0
				}
			}
			steps := float64(b.N * n * (costSteps + 1))
			b.ReportMetric(float64(wall[0].Microseconds())/float64(b.N)/1000, "sized-ms/batch")
			b.ReportMetric(float64(wall[1].Microseconds())/float64(b.N)/1000, "fixed-ms/batch")
			b.ReportMetric(float64(cpu[0].Microseconds())/steps, "sized-cpu-µs/step")
			b.ReportMetric(float64(cpu[1].Microseconds())/steps, "fixed-cpu-µs/step")
			b.ReportMetric(float64(wall[0])/float64(wall[1]), "x-wall")
			b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "x-cpu")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkConcurrentSessionsProcess is BenchmarkConcurrentSessions with
// each side in its own process, so each one's CPU is its own: a `herald up`
// (every service and the embedded JetStream; --concurrency 1024), the
// scripted model in a child process (200 ms a call), and the in-process
// loops in this test process against the same model afterwards. Figures:
// each side's wall time and its ratio to the ideal; CPU per model call of
// Herald, of the loops, and of the model while each side ran; Herald's CPU
// per call over the loops'; and cpu-floor-x-ideal, the shortest wall time
// that Herald's and the model's CPU allow on this machine's cores (their
// CPU / the cores), as a ratio to the ideal: a run that cannot beat it is
// bound by the cores, however well the work is packed.
func BenchmarkConcurrentSessionsProcess(b *testing.B) {
	const latency = 200 * time.Millisecond
	for _, c := range []struct{ sessions, calls int }{{200, 5}, {1000, 10}} {
		b.Run(fmt.Sprintf("%dx%d", c.sessions, c.calls), func(b *testing.B) {
			url, modelPID := startCostModelProcess(b, c.calls-1, latency)
			up := startUpProcess(b, url, 0, upOptions{args: []string{"--concurrency", "1024"}})
			base := newBaselineLoop(b, url, 0)
			up.settle(b)
			base.run(b, "warm-up")
			ideal := time.Duration(c.calls) * latency
			calls := float64(c.sessions * c.calls)
			perCall := func(d time.Duration) float64 { return float64(d.Microseconds()) / calls }
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h0, m0, start := up.cpu(b), processCPU(b, modelPID), time.Now()
				up.batch(b, c.sessions, fmt.Sprintf("concurrent %d", i))
				wall, heraldCPU, heraldModel := time.Since(start), up.cpu(b)-h0, processCPU(b, modelPID)-m0
				s0, m0, start := cpuTime(), processCPU(b, modelPID), time.Now()
				var wg sync.WaitGroup
				for j := 0; j < c.sessions; j++ {
					wg.Go(func() { base.run(b, fmt.Sprintf("baseline %d/%d", i, j)) })
				}
				wg.Wait()
				inproc, inprocCPU, inprocModel := time.Since(start), cpuTime()-s0, processCPU(b, modelPID)-m0
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(wall.Seconds()/ideal.Seconds(), "x-ideal")
				b.ReportMetric(inproc.Seconds(), "inproc-wall-s")
				b.ReportMetric(inproc.Seconds()/ideal.Seconds(), "inproc-x-ideal")
				b.ReportMetric(perCall(heraldCPU), "herald-cpu-µs/call")
				b.ReportMetric(perCall(heraldModel), "model-cpu-µs/call")
				b.ReportMetric(perCall(inprocCPU), "inproc-cpu-µs/call")
				b.ReportMetric(perCall(inprocModel), "inproc-model-cpu-µs/call")
				b.ReportMetric(float64(heraldCPU)/float64(inprocCPU), "x-inproc-cpu")
				floor := (heraldCPU + heraldModel) / time.Duration(runtime.NumCPU())
				b.ReportMetric(floor.Seconds()/ideal.Seconds(), "cpu-floor-x-ideal")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// batch runs n sessions at once and waits for all of them. Their results
// come through one subscription: a synchronous subscription per session
// allocates its 65,536-message channel (nats.go's SubChanLen), and 1,000 of
// them took this process 0.6 s before the last task was even published.
func (u *upProcess) batch(b testing.TB, n int, prefix string) {
	var mu sync.Mutex
	waiting := make(map[string]chan proto.Result, n)
	sub, err := u.nc.Subscribe(bus.SessionResult("*"), func(m *nats.Msg) {
		var res proto.Result
		if json.Unmarshal(m.Data, &res) != nil {
			return
		}
		mu.Lock()
		ch := waiting[res.SessionID]
		mu.Unlock()
		if ch != nil {
			select {
			case ch <- res:
			default: // a result published twice
			}
		}
	})
	require.NoError(b, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(b, u.nc.Flush())
	var wg sync.WaitGroup
	for j := range n {
		wg.Go(func() {
			task := NewTask(fmt.Sprintf("%s-%d", prefix, j))
			task.MaxIterations = costSteps + 1
			ch := make(chan proto.Result, 1)
			mu.Lock()
			waiting[task.SessionID] = ch
			mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(b, bus.PublishJSON(ctx, u.js, bus.TasksSubject, "", task))
			select {
			case res := <-ch:
				require.Equal(b, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
				require.Equal(b, "done", res.FinalResponse)
			case <-time.After(2 * time.Minute):
				b.Errorf("no result for %s", task.SessionID)
			}
		})
	}
	wg.Wait()
}

// BenchmarkStepOverheadProcess is BenchmarkStepOverhead measured outside-in,
// as the issue puts it: a `herald up` process serves the sessions, and this
// test process times their steps from THINKING events and runs the
// in-process loop against the same model (its own process), a session of
// each alternately.
func BenchmarkStepOverheadProcess(b *testing.B) {
	url := startCostModel(b, costSteps)
	up := startUpProcess(b, url, 0, upOptions{})
	base := newBaselineLoop(b, url, 0)
	up.settle(b)
	base.run(b, "warm-up")
	var herald, inproc []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		task := NewTask(fmt.Sprintf("overhead %d", i))
		stop := watchThinking(b, up.nc, task.SessionID)
		up.runTask(b, task)
		herald = append(herald, stop()...)
		steps := base.run(b, fmt.Sprintf("baseline %d", i))
		inproc = append(inproc, steps[:len(steps)-1]...) // tool steps, as Herald's intervals
	}
	reportOverhead(b, herald, inproc)
}
