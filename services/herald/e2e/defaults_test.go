package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// symlinkedDir is a fresh folder reached through a symlink, as /tmp is on
// some machines: the path a user's shell reports is not the real one.
func symlinkedDir(t *testing.T) (link, real string) {
	t.Helper()
	base := t.TempDir()
	real = filepath.Join(base, "real", "project")
	require.NoError(t, os.MkdirAll(real, 0o755))
	link = filepath.Join(base, "link")
	require.NoError(t, os.Symlink(filepath.Join(base, "real"), link))
	return filepath.Join(link, "project"), real
}

// userUp is a `herald up` started as a user would, from dir.
type userUp struct {
	cmd    *exec.Cmd
	url    string
	stderr *heraldtest.SyncBuffer
}

// startUserUp starts `herald up` in dir with the default data folder (./.herald)
// unless args name another; only its ports are chosen so that tests do not
// collide. It returns once the streams are declared.
func startUserUp(t *testing.T, ctx context.Context, dir string, env map[string]string, args ...string) *userUp {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	full := map[string]string{"HERALD_NATS_URL": url, "HERALD_CLICKHOUSE_DSN": freshClickHouse(t)}
	for k, v := range env {
		full[k] = v
	}
	up := &userUp{url: url, stderr: &heraldtest.SyncBuffer{}}
	up.cmd = heraldCmd(t, ctx, dir, full, append([]string{"up", "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", ""}, args...)...)
	// A shell's PWD is the path it was given, symlinks and all.
	up.cmd.Env = append(up.cmd.Env, "PWD="+dir)
	up.cmd.Stderr = up.stderr
	require.NoError(t, up.cmd.Start())
	t.Cleanup(func() {
		if up.cmd.ProcessState == nil {
			_ = up.cmd.Process.Kill()
			_ = up.cmd.Wait()
		}
	})
	require.Eventually(t, func() bool {
		nc, err := nats.Connect(url)
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		_, err = js.Stream(ctx, bus.StreamTasks)
		return err == nil
	}, 60*time.Second, 50*time.Millisecond, "herald up never became ready: %s", up.stderr)
	return up
}

// The README's platform path with nothing configured: `herald up` in a
// folder reached through a symlink, its data folder the default relative
// ./.herald, a task published with the real nats CLI. The tools work in
// <data-dir>/workspace and the task ends with the model's answer.
func TestUpWithDefaultDataFolderRunsToolsOfATaskPublishedWithTheNatsCLI(t *testing.T) {
	cli := natsCLI(t)
	model, err := scripted.Start(scripted.Conversation(
		scripted.Tool("write_file", `{"path":"notes.txt","content":"written by the agent\n"}`),
		scripted.Tool("read_file", `{"path":"notes.txt"}`),
		scripted.Tool("terminal", `{"command":"cat notes.txt"}`),
		scripted.Text("notes.txt says: written by the agent"),
	))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, real := symlinkedDir(t)
	up := startUserUp(t, ctx, dir, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"})

	nc, err := nats.Connect(up.url)
	require.NoError(t, err)
	defer nc.Close()
	results, err := nc.SubscribeSync("herald.session.s1.result")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	out, err := exec.CommandContext(ctx, cli, "--server", up.url, "pub", "herald.tasks",
		`{"session_id":"s1","prompt":"write notes.txt and read it back"}`).CombinedOutput()
	require.NoError(t, err, "nats pub: %s", out)

	msg, err := results.NextMsg(90 * time.Second)
	require.NoError(t, err, "herald up: %s", up.stderr)
	var res proto.Result
	require.NoError(t, json.Unmarshal(msg.Data, &res))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "herald up: %s", up.stderr)
	data, err := os.ReadFile(filepath.Join(real, ".herald", "workspace", "notes.txt"))
	require.NoError(t, err, "the tools work in <data-dir>/workspace")
	require.Equal(t, "written by the agent\n", string(data))
	require.Contains(t, up.stderr.String(), "their tools work in "+filepath.Join(real, ".herald", "workspace"), "the banner names the real workspace")
	for i, r := range model.Requests()[1:] {
		require.NotContains(t, r.LastMessage().Text(), "outside the workspace", "tool result %d", i)
	}
	require.Contains(t, model.Requests()[3].LastMessage().Text(), "written by the agent", "the terminal ran in the workspace")
}

// `herald serve toolrunner` from the README's scale-out section, started
// from a folder reached through a symlink with the default data folder,
// runs the tools of a task another process's loop published.
func TestServeToolrunnerWithDefaultDataFolderRunsTools(t *testing.T) {
	cli := natsCLI(t)
	model, err := scripted.Start(scripted.Conversation(
		scripted.Tool("write_file", `{"path":"out.txt","content":"from the runner"}`),
		scripted.Text("done"),
	))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}
	upDir, _ := symlinkedDir(t)
	up := startUserUp(t, ctx, upDir, env)
	// This `herald up` runs its own tool runner too; the task names a pool
	// only the served runner takes.
	dir, real := symlinkedDir(t)
	env["HERALD_NATS_URL"] = up.url
	var runnerErr heraldtest.SyncBuffer
	runner := heraldCmd(t, ctx, dir, env, "serve", "toolrunner", "--pool", "edge")
	runner.Env = append(runner.Env, "PWD="+dir)
	runner.Stderr = &runnerErr
	require.NoError(t, runner.Start())
	t.Cleanup(func() { _ = runner.Process.Kill(); _ = runner.Wait() })

	nc, err := nats.Connect(up.url)
	require.NoError(t, err)
	defer nc.Close()
	results, err := nc.SubscribeSync("herald.session.s2.result")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	out, err := exec.CommandContext(ctx, cli, "--server", up.url, "pub", "herald.tasks",
		`{"session_id":"s2","prompt":"write out.txt","pool":"edge"}`).CombinedOutput()
	require.NoError(t, err, "nats pub: %s", out)
	msg, err := results.NextMsg(90 * time.Second)
	require.NoError(t, err, "runner: %s\nup: %s", &runnerErr, up.stderr)
	var res proto.Result
	require.NoError(t, json.Unmarshal(msg.Data, &res))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	data, err := os.ReadFile(filepath.Join(real, ".herald", "workspace", "out.txt"))
	require.NoError(t, err, "the served runner's workspace is its own ./.herald/workspace; runner: %s", &runnerErr)
	require.Equal(t, "from the runner", string(data))
}
