package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
)

// The cost benchmarks (issue 14) measure what a step spends, outside the
// model: CPU as this process's user + system time, and bytes stored by
// JetStream. The scripted model runs in a child process so its own work is
// in neither figure, and each Herald figure stands beside an in-process
// loop on openai-go against the same model, measured in the same run,
// alternating.

// costModelEnv makes this test binary a model that calls read_file until a
// history holds the given number of assistant messages; costModelDelayEnv,
// when set, is the milliseconds it takes before each reply (none: it
// answers at once). The model is a lean scripted server (StartLean): it
// stands in for a provider on another machine, so it takes as little of
// these cores as it can, keeping no request and decoding only the roles.
const (
	costModelEnv      = "HERALD_COST_MODEL_STEPS"
	costModelDelayEnv = "HERALD_COST_MODEL_DELAY_MS"
)

// costSteps is the number of tool steps of one measured session; with the
// answer that is costSteps+1 model calls.
const costSteps = 10

func init() {
	v := os.Getenv(costModelEnv)
	if v == "" {
		return
	}
	steps, err := strconv.Atoi(v)
	if err != nil {
		panic(err)
	}
	script := costScript(steps)
	if v := os.Getenv(costModelDelayEnv); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			panic(err)
		}
		script = delayed(script, time.Duration(ms)*time.Millisecond)
	}
	model, err := scripted.StartLean(script)
	if err != nil {
		panic(err)
	}
	fmt.Println("MODEL_URL=" + model.URL)
	select {} // until the benchmark kills this process
}

// costScript first reads history.txt, whose size is the history the
// session's later steps carry, then calls read_file on a small file until
// the history holds steps assistant messages, then answers.
func costScript(steps int) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		switch n := r.AssistantCount(); {
		case n == 0:
			return scripted.Tool("read_file", `{"path":"history.txt","limit":100000}`)
		case n < steps:
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"data.txt","limit":%d}`, n+1))
		}
		return scripted.Text("done")
	}
}

// delayed is script with every reply taking d.
func delayed(script scripted.Script, d time.Duration) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		reply := script(r)
		reply.Delay = d
		return reply
	}
}

// startCostModel starts the cost model (costScript) in a child process and
// returns its URL.
func startCostModel(b testing.TB, steps int) string {
	url, _ := startCostModelProcess(b, steps, 0)
	return url
}

// startCostModelProcess starts the cost model in a child process, each
// reply taking delay, and returns its URL and process id.
func startCostModelProcess(b testing.TB, steps int, delay time.Duration) (string, int) {
	env := []string{costModelEnv + "=" + strconv.Itoa(steps)}
	if delay > 0 {
		env = append(env, costModelDelayEnv+"="+strconv.FormatInt(delay.Milliseconds(), 10))
	}
	return startModelChild(b, env...)
}

// startModelChild runs this test binary as a model in a child process,
// with env added to this process's environment (naming the script), and
// returns the URL it prints and its process id.
func startModelChild(b testing.TB, env ...string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "MODEL_URL="); ok {
			go func() { // keep draining
				for sc.Scan() {
				}
			}()
			return url, cmd.Process.Pid
		}
	}
	b.Fatalf("the model process printed no URL: %v", sc.Err())
	return "", 0
}

// cpuTime is this process's user + system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startCostHarness runs Herald against the model at url, with compression
// off, a context window large enough for a 1 MB history and tool output
// limits that let a 1 MB file through whole.
func startCostHarness(b *testing.B, url string) *H {
	h := Start(b, costScript(costSteps), WithConfig(func(c *config.Config) {
		c.Primary.BaseURL = url
		c.ContextWindows = map[string]int{"test-model": 100_000_000}
		c.Compression.Enabled = false
		c.ToolOutput.MaxResultChars = 2 << 20
		c.ToolOutput.ReadFileMaxLines = 100_000
	}))
	h.StopEventLog()
	writeCostFiles(b, h.Workspace, 0)
	return h
}

// writeCostFiles writes the small file of every step and history.txt of
// about size bytes, which the first step reads into the history.
func writeCostFiles(b testing.TB, dir string, size int) {
	line := strings.Repeat("history ", 8) + "\n"
	require.NoError(b, os.WriteFile(filepath.Join(dir, "data.txt"), []byte("some data\n"), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "history.txt"), []byte(strings.Repeat(line, max(size/len(line), 1))), 0o644))
}

func runCostSession(b *testing.B, h *H, prompt string) {
	task := NewTask(prompt)
	task.MaxIterations = costSteps + 1
	res := h.WaitResultOf(task)
	require.Equal(b, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(b, "done", res.FinalResponse)
}

// WaitResultOf submits task and waits for its result.
func (h *H) WaitResultOf(task proto.Task) proto.Result {
	h.Submit(task)
	return h.WaitResult(task, 5*time.Minute)
}

// baselineLoop is the in-process loop: openai-go streaming calls with the
// same growing history, and the same file read, called directly.
type baselineLoop struct {
	client openai.Client
	dir    string
	tools  []openai.ChatCompletionToolUnionParam
}

func newBaselineLoop(b *testing.B, url string, size int) *baselineLoop {
	dir := b.TempDir()
	writeCostFiles(b, dir, size)
	tool := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "read_file", Description: openai.String("Read a file."),
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}}},
	})
	return &baselineLoop{client: openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("x"), option.WithMaxRetries(0)),
		dir: dir, tools: []openai.ChatCompletionToolUnionParam{tool}}
}

// run drives one session to its answer and returns each step's duration.
func (l *baselineLoop) run(b *testing.B, prompt string) []time.Duration {
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a benchmark."), openai.UserMessage(prompt)}
	var steps []time.Duration
	for {
		start := time.Now()
		stream := l.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "test-model", Messages: msgs, Tools: l.tools})
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		require.NoError(b, stream.Err())
		require.NoError(b, stream.Close())
		msg := acc.Choices[0].Message
		msgs = append(msgs, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			require.Equal(b, "done", msg.Content)
			steps = append(steps, time.Since(start))
			return steps
		}
		for _, c := range msg.ToolCalls {
			var args struct{ Path string }
			require.NoError(b, json.Unmarshal([]byte(c.Function.Arguments), &args))
			data, err := os.ReadFile(filepath.Join(l.dir, args.Path))
			require.NoError(b, err)
			msgs = append(msgs, openai.ToolMessage("1|"+string(data), c.ID))
		}
		steps = append(steps, time.Since(start))
	}
}

// costHistories are the history sizes the CPU benchmarks measure a step at.
var costHistories = []struct {
	name string
	size int
}{{"tiny", 0}, {"1MB", 1 << 20}}

// BenchmarkStepCPU: CPU per step (one model call and its tool call) at a
// tiny history and at a 1 MB one, Herald beside the in-process loop,
// alternating within one run. Default -benchtime 1x is one session of
// each; use e.g. -benchtime 5x for steadier figures.
func BenchmarkStepCPU(b *testing.B) {
	for _, c := range costHistories {
		b.Run(c.name, func(b *testing.B) {
			url := startCostModel(b, costSteps)
			h := startCostHarness(b, url)
			writeCostFiles(b, h.Workspace, c.size)
			base := newBaselineLoop(b, url, c.size)
			// warm up both (connections, consumers, caches)
			runCostSession(b, h, "warm-up")
			base.run(b, "warm-up")
			var herald, inproc time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := cpuTime()
				runCostSession(b, h, fmt.Sprintf("herald %d", i))
				t1 := cpuTime()
				base.run(b, fmt.Sprintf("baseline %d", i))
				t2 := cpuTime()
				herald += t1 - t0
				inproc += t2 - t1
			}
			steps := float64(b.N * (costSteps + 1))
			b.ReportMetric(float64(herald.Microseconds())/steps, "herald-cpu-µs/step")
			b.ReportMetric(float64(inproc.Microseconds())/steps, "inproc-cpu-µs/step")
			b.ReportMetric(float64(herald)/float64(inproc), "x-inproc")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// storedSubjects matches the subjects some stream stores.
type storedSubjects struct{ filters, streams []string }

func newStoredSubjects(b *testing.B, js jetstream.JetStream) *storedSubjects {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &storedSubjects{}
	list := js.ListStreams(ctx)
	for info := range list.Info() {
		for _, f := range info.Config.Subjects {
			s.filters, s.streams = append(s.filters, f), append(s.streams, info.Config.Name)
		}
	}
	require.NoError(b, list.Err())
	return s
}

// stream names the stream that stores subject, or "".
func (s *storedSubjects) stream(subject string) string {
	for i, f := range s.filters {
		if subjectMatches(f, subject) {
			return s.streams[i]
		}
	}
	return ""
}

func subjectMatches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, t := range ft {
		switch {
		case t == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case t != "*" && t != st[i]:
			return false
		}
	}
	return len(ft) == len(st)
}

// BenchmarkStepBytes: bytes JetStream stores per step (payloads and
// headers of every message published on a stream's subject: transcript,
// requests and their claim-checked parts, responses, results, state, events,
// usage) at 10 KB, 100 KB and 1 MB histories: the first step reads a file
// of that size into the history; the figure is the median over the later
// steps, each of which adds a few hundred bytes.
func BenchmarkStepBytes(b *testing.B) {
	url := startCostModel(b, costSteps)
	h := startCostHarness(b, url)
	runCostSession(b, h, "warm-up")
	match := newStoredSubjects(b, h.JS)
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			writeCostFiles(b, h.Workspace, size)
			var perStep []float64
			for i := 0; i < b.N; i++ {
				task := NewTask(fmt.Sprintf("bytes %d", i))
				task.MaxIterations = costSteps + 1
				var mu sync.Mutex
				var total int
				var marks []int
				byStream := map[string]int{} // after the second step began
				countBy := map[string]int{}
				events := "herald.session." + task.SessionID + ".events"
				sub, err := h.NC.Subscribe(">", func(m *nats.Msg) {
					stream := match.stream(m.Subject)
					if stream == "" || strings.HasPrefix(m.Reply, "$JS.ACK.") {
						return // not stored here, or a consumer's delivery of what was
					}
					size := len(m.Data)
					for k, vs := range m.Header {
						for _, v := range vs {
							size += len(k) + len(v) + 4
						}
					}
					mu.Lock()
					defer mu.Unlock()
					total += size
					if len(marks) >= 2 {
						byStream[stream] += size
						countBy[stream]++
					}
					if m.Subject != events {
						return
					}
					var ev proto.Event
					if json.Unmarshal(m.Data, &ev) == nil && ev.Type == proto.EventState && ev.State == proto.StateThinking {
						marks = append(marks, total)
					}
				})
				require.NoError(b, err)
				res := h.WaitResultOf(task)
				require.Equal(b, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
				require.NoError(b, h.NC.Flush())
				require.NoError(b, sub.Unsubscribe())
				mu.Lock()
				require.Len(b, marks, costSteps+1)
				for j := 2; j < len(marks); j++ {
					perStep = append(perStep, float64(marks[j]-marks[j-1]))
				}
				if i == 0 {
					var parts []string
					for name, n := range byStream {
						parts = append(parts, fmt.Sprintf("%s %d (%.1f msgs)", name, n/(costSteps-1), float64(countBy[name])/float64(costSteps-1)))
					}
					sort.Strings(parts)
					b.Logf("bytes per step after the first, by stream: %s", strings.Join(parts, ", "))
				}
				mu.Unlock()
			}
			sort.Float64s(perStep)
			b.ReportMetric(perStep[len(perStep)/2], "bytes/step")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkStepOverhead: one session's step (model call + tool call, zero-
// latency model in a child process) through Herald beside the in-process
// loop, a session of each alternately; the overhead is the difference of
// the two at each percentile. Herald's step is the interval between
// consecutive THINKING events.
func BenchmarkStepOverhead(b *testing.B) {
	url := startCostModel(b, costSteps)
	h := startCostHarness(b, url)
	base := newBaselineLoop(b, url, 0)
	runCostSession(b, h, "warm-up")
	base.run(b, "warm-up")
	var herald, inproc []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		task := NewTask(fmt.Sprintf("overhead %d", i))
		task.MaxIterations = costSteps + 1
		stop := watchThinking(b, h.NC, task.SessionID)
		res := h.WaitResultOf(task)
		require.Equal(b, proto.ExitTextResponse, res.ExitReason)
		herald = append(herald, stop()...)
		steps := base.run(b, fmt.Sprintf("baseline %d", i))
		inproc = append(inproc, steps[:len(steps)-1]...) // tool steps, as Herald's intervals
	}
	reportOverhead(b, herald, inproc)
}

// reportOverhead reports Herald's and the in-process loop's step at p50 and
// p99, and their difference, the overhead.
func reportOverhead(b *testing.B, herald, inproc []time.Duration) {
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		hq, iq := percentile(herald, p.q), percentile(inproc, p.q)
		b.ReportMetric(float64(hq.Microseconds()), "herald-"+p.name+"-µs")
		b.ReportMetric(float64(iq.Microseconds()), "inproc-"+p.name+"-µs")
		b.ReportMetric(float64((hq - iq).Microseconds()), "overhead-"+p.name+"-µs")
	}
	b.ReportMetric(0, "ns/op")
}
