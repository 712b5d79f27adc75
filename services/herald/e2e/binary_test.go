package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// freePort returns a loopback port nobody listens on.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// heraldCmd prepares bin/herald with a clean environment: no NATS reachable
// unless the test says so, logs quiet.
func heraldCmd(t testing.TB, ctx context.Context, dir string, env map[string]string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, heraldBin, args...)
	cmd.Dir = dir
	base := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"),
		"HERALD_NATS_URL": fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)),
		// no private ClickHouse per run (seconds each) unless a test asks,
		// and none recorded in the real user's state folder
		"HERALD_PRIVATE_CLICKHOUSE": "off", "XDG_STATE_HOME": t.TempDir(),
	}
	for k, v := range env {
		base[k] = v
	}
	for k, v := range base {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

func TestDemoRunsToolsStreamsAndPrintsCostsFromClickHouse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_CLICKHOUSE_DSN": freshClickHouse(t)}, "demo")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "stderr: %s", errOut.String())
	stdout := out.String()
	require.Contains(t, stdout, "Hello from Herald!", "the file written by write_file and read back by read_file")
	require.Contains(t, stdout, "Done. I wrote hello.txt", "the streamed final answer")
	require.Contains(t, errOut.String(), "⚙ write_file", "tool progress is shown")
	require.Contains(t, errOut.String(), "⚙ read_file")
	require.Contains(t, stdout, "read back from ClickHouse")
	require.Contains(t, stdout, "herald-demo", "the cost table names the model")
}

func TestRunAgainstAnOpenAICompatibleServerPrintsResultJSON(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(
		scripted.Reply{ToolCalls: []scripted.Call{{Name: "write_file", Args: `{"path":"notes/todo.txt","content":"buy milk\n"}`}}},
		scripted.Reply{ToolCalls: []scripted.Call{{Name: "terminal", Args: `{"command":"wc -l notes/todo.txt"}`}}},
		scripted.Text("The list has one line: buy milk."),
	))
	require.NoError(t, err)
	defer model.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"},
		"run", "--json", "write my todo list")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "exit code 0 for text_response; stderr: %s", errOut.String())

	var res proto.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "stdout is the result JSON only: %q", out.String())
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "The list has one line: buy milk.", res.FinalResponse)
	require.Equal(t, 3, res.APICalls)
	require.Equal(t, 3, res.Iterations)
	require.Positive(t, res.Usage.InputTokens)
	require.Positive(t, res.Usage.OutputTokens)
	data, err := os.ReadFile(filepath.Join(dir, "notes", "todo.txt"))
	require.NoError(t, err, "the workspace of an in-process run is the current directory")
	require.Equal(t, "buy milk\n", string(data))

	reqs := model.Requests()
	require.Len(t, reqs, 3)
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	require.Equal(t, "tool", last.Role)
	require.Contains(t, last.Text(), "1 notes/todo.txt", "the terminal output reached the model")
	require.Equal(t, "m", reqs[0].Model)
}

func TestRunExitCodesAndUsageErrors(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Tool("terminal", `{"command":"true"}`)))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}

	cmd := heraldCmd(t, ctx, t.TempDir(), env, "run")
	require.Equal(t, 2, exitCode(cmd.Run()), "no prompt is a usage error")
	cmd = heraldCmd(t, ctx, t.TempDir(), env, "run", "--no-such-flag", "x")
	require.Equal(t, 2, exitCode(cmd.Run()))

	var out bytes.Buffer
	cmd = heraldCmd(t, ctx, t.TempDir(), env, "run", "--json", "--max-iterations", "2", "loop forever")
	cmd.Stdout = &out
	require.Equal(t, 1, exitCode(cmd.Run()), "an exit reason other than text_response exits 1")
	var res proto.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, proto.ExitMaxIterations, res.ExitReason)
}

func TestNegativeConcurrencyIsAUsageError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{"up", "--concurrency", "-1", "--http", ""}, {"serve", "--concurrency", "-3", "loop"}} {
		var stderr bytes.Buffer
		cmd := heraldCmd(t, ctx, t.TempDir(), nil, args...)
		cmd.Stderr = &stderr
		require.Equal(t, 2, exitCode(cmd.Run()), "herald %v", args)
		require.Contains(t, stderr.String(), "--concurrency must be a positive number of calls", "herald %v", args)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func TestUpTakesTasksFromNATSAndCostShowsThem(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(
		scripted.Tool("write_file", `{"path":"a.txt","content":"alpha"}`),
		scripted.Reply{Content: "Wrote a.txt.", ChunkChars: 3},
	))
	require.NoError(t, err)
	defer model.Close()
	dsn := freshClickHouse(t)
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini",
		"HERALD_CLICKHOUSE_DSN": dsn, "HERALD_NATS_URL": url}
	var upErr heraldtest.SyncBuffer
	up := heraldCmd(t, ctx, data, env, "up", "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", data, "--http", "")
	up.Stderr = &upErr
	require.NoError(t, up.Start())
	t.Cleanup(func() { _ = up.Process.Signal(os.Interrupt); _ = up.Wait() })

	var nc *nats.Conn
	require.Eventually(t, func() bool {
		nc, err = nats.Connect(url)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "herald up never listened: %s", upErr.String())
	defer nc.Close()
	events, err := nc.SubscribeSync("herald.session.s1.events")
	require.NoError(t, err)
	results, err := nc.SubscribeSync("herald.session.s1.result")
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := js.Stream(ctx, bus.StreamTasks)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	// A plain NATS publish, as `nats pub herald.tasks '{...}'` does.
	require.NoError(t, nc.Publish("herald.tasks", []byte(`{"session_id":"s1","prompt":"write a.txt"}`)))

	msg, err := results.NextMsg(60 * time.Second)
	require.NoError(t, err, "stderr of herald up: %s", upErr.String())
	var res proto.Result
	require.NoError(t, json.Unmarshal(msg.Data, &res))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "Wrote a.txt.", res.FinalResponse)
	require.Equal(t, "s1", res.SessionID)
	content, err := os.ReadFile(filepath.Join(data, "workspace", "a.txt"))
	require.NoError(t, err, "herald up's workspace is <data-dir>/workspace")
	require.Equal(t, "alpha", string(content))

	seen := map[string]bool{}
	var streamed strings.Builder
	for {
		m, err := events.NextMsg(time.Second)
		if err != nil {
			break
		}
		var ev proto.Event
		require.NoError(t, json.Unmarshal(m.Data, &ev))
		seen[ev.Type+":"+ev.State] = true
		if ev.Type == proto.EventDelta {
			streamed.WriteString(ev.Delta)
		}
	}
	for _, want := range []string{"state:THINKING", "state:ACTING", "state:OBSERVING", "state:DONE", "tool_started:", "tool_finished:", "result:"} {
		require.True(t, seen[want], "event %s missing; saw %v", want, seen)
	}
	require.Equal(t, "Wrote a.txt.", streamed.String(), "deltas stream the answer")

	// herald cost reads the same run back from ClickHouse.
	var costOut bytes.Buffer
	var rep accounting.CostReport
	require.Eventually(t, func() bool {
		costOut.Reset()
		cmd := heraldCmd(t, ctx, data, env, "cost", "--by", "model", "--json")
		cmd.Stdout = &costOut
		if cmd.Run() != nil || json.Unmarshal(costOut.Bytes(), &rep) != nil {
			return false
		}
		return rep.Total.Calls == uint64(res.APICalls)
	}, 60*time.Second, 200*time.Millisecond, "herald cost never showed the run: %s", costOut.String())
	require.Len(t, rep.Rows, 1)
	require.Equal(t, "gpt-4o-mini", rep.Rows[0].Key)
	require.InDelta(t, res.CostUSD, rep.Total.CostUSD, 1e-9, "ClickHouse holds what the result reported")
	require.Positive(t, rep.Total.CostUSD, "gpt-4o-mini is priced by the built-in table")
	require.Equal(t, uint64(res.Usage.InputTokens), rep.Total.InputTokens)

	var table bytes.Buffer
	cmd := heraldCmd(t, ctx, data, env, "cost", "--by", "model")
	cmd.Stdout = &table
	require.NoError(t, cmd.Run())
	require.Contains(t, table.String(), "gpt-4o-mini")
}

// Ctrl-C during `herald run` interrupts the turn: the in-flight model call is
// abandoned and the result says interrupted_by_user, exit code 1.
func TestRunCtrlCInterruptsTheTurn(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Reply{Content: "too late", Delay: time.Minute}))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"},
		"run", "--json", "think for a long time")
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return model.Calls() > 0 }, time.Minute, 10*time.Millisecond, "the model call started")
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.Equal(t, 1, exitCode(cmd.Wait()))
	require.Less(t, time.Since(start), 15*time.Second)
	var res proto.Result
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), "stdout: %q", out.String())
	require.Equal(t, proto.ExitInterrupted, res.ExitReason)
	require.NotContains(t, res.FinalResponse, "too late")
}

// A dangerous command asks y/N on the terminal: "y" lets it run, anything
// else (or no answer) denies it.
func TestRunAsksBeforeADangerousCommand(t *testing.T) {
	for _, tc := range []struct {
		answer  string
		removed bool
	}{{"y\n", true}, {"n\n", false}, {"", false}} {
		model, err := scripted.Start(scripted.Conversation(
			scripted.Tool("terminal", `{"command":"rm -rf build"}`),
			scripted.Text("done"),
		))
		require.NoError(t, err)
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "build", "out.o"), "x")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var errOut bytes.Buffer
		cmd := heraldCmd(t, ctx, dir, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}, "run", "clean up")
		cmd.Stdin, cmd.Stderr = strings.NewReader(tc.answer), &errOut
		require.NoError(t, cmd.Run(), "stderr: %s", errOut.String())
		cancel()
		model.Close()
		require.Contains(t, errOut.String(), "rm -rf build", "the prompt shows the command")
		_, statErr := os.Stat(filepath.Join(dir, "build"))
		require.Equal(t, tc.removed, os.IsNotExist(statErr), "answer %q", tc.answer)
	}
}
