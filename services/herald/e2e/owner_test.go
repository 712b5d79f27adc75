package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// heldBy waits until the data folder's lock file names pid, and returns it.
func heldBy(t *testing.T, dataDir string, pid int) map[string]any {
	t.Helper()
	var holder map[string]any
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(filepath.Join(dataDir, "herald.lock"))
		holder = nil
		return err == nil && json.Unmarshal(data, &holder) == nil && holder["pid"] == float64(pid)
	}, 60*time.Second, 20*time.Millisecond, "the lock file never named process %d", pid)
	return holder
}

// A second `herald run` on a data folder an in-process `herald run` holds
// stops at once, naming the folder and the process; it never opens the same
// store. The first prints its answer and exits.
func TestSecondRunOnAFolderInUseStopsNamingTheHolder(t *testing.T) {
	release := make(chan struct{})
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		if strings.Contains(r.Messages[len(r.Messages)-1].Text(), "slow") {
			<-release
			return scripted.Text("the slow answer")
		}
		return scripted.Text("the other answer")
	})
	require.NoError(t, err)
	defer model.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, real := symlinkedDir(t)
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}

	var out1, err1 heraldtest.SyncBuffer
	first := heraldCmd(t, ctx, dir, env, "run", "a slow task")
	first.Env = append(first.Env, "PWD="+dir)
	first.Stdout, first.Stderr = &out1, &err1
	require.NoError(t, first.Start())
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	heldBy(t, filepath.Join(real, ".herald"), first.Process.Pid)
	require.Eventually(t, func() bool { return len(model.Requests()) > 0 }, 60*time.Second, 20*time.Millisecond,
		"the first run never called the model: %s", &err1)

	var out2, err2 bytes.Buffer
	second := heraldCmd(t, ctx, dir, env, "run", "another task")
	second.Stdout, second.Stderr = &out2, &err2
	start := time.Now()
	require.Equal(t, 1, exitCode(second.Run()), "stdout: %s\nstderr: %s", &out2, &err2)
	require.Less(t, time.Since(start), 20*time.Second, "the second run stops at once, it does not wait for the folder")
	msg := err2.String()
	require.Contains(t, msg, "data folder "+filepath.Join(real, ".herald")+" is in use by process "+strconv.Itoa(first.Process.Pid))
	require.Contains(t, msg, `herald run "a slow task"`, "the holder's command")
	require.NotContains(t, msg, "Recovering", "the store was never opened a second time")
	require.Len(t, model.Requests(), 1, "the second run never reached the model")
	err2.Reset()
	list := heraldCmd(t, ctx, dir, env, "sessions", "list")
	list.Stderr = &err2
	require.Equal(t, 1, exitCode(list.Run()), "sessions list does not open a store in use either")
	require.Contains(t, err2.String(), "is in use by process "+strconv.Itoa(first.Process.Pid))

	close(release)
	select {
	case err := <-done:
		require.NoError(t, err, "stderr: %s", &err1)
	case <-ctx.Done():
		t.Fatalf("the first run printed %q and never exited; stderr: %s", out1.String(), &err1)
	}
	require.Equal(t, "the slow answer\n", out1.String())

	// The folder is free again: a run takes it and answers.
	out2.Reset()
	third := heraldCmd(t, ctx, dir, env, "run", "another task")
	third.Stdout = &out2
	require.NoError(t, third.Run())
	require.Equal(t, "the other answer\n", out2.String())
}

// A `herald run` in the folder of a running `herald up` whose NATS it cannot
// find at HERALD_NATS_URL attaches to it through the data folder's lock,
// says so, names the server's workspace, and sends the caller's --model.
func TestRunAttachesToTheHeraldHoldingItsDataFolder(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Tool("write_file", `{"path":"seen.txt","content":"x"}`), scripted.Text("attached answer")))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, real := symlinkedDir(t)
	up := startUserUp(t, ctx, dir, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "server-model"})
	require.Eventually(t, func() bool {
		return heldBy(t, filepath.Join(real, ".herald"), up.cmd.Process.Pid)["nats"] == up.url
	}, 30*time.Second, 20*time.Millisecond, "herald up's lock names its NATS")
	require.NoError(t, os.WriteFile(filepath.Join(real, "herald.yaml"), []byte("agent: {max_turns: 7}\n"), 0o644))

	var out, errOut bytes.Buffer
	// HERALD_NATS_URL names a port nobody listens on (heraldCmd's default).
	run := heraldCmd(t, ctx, dir, map[string]string{"HERALD_BASE_URL": model.URL}, "run", "--model", "caller-model", "write seen.txt")
	run.Env = append(run.Env, "PWD="+dir)
	run.Stdout, run.Stderr = &out, &errOut
	require.NoError(t, run.Run(), "stderr: %s", &errOut)
	require.Equal(t, "attached answer\n", out.String())
	msg := errOut.String()
	require.Contains(t, msg, fmt.Sprintf("herald: attached to the running Herald at %s (pid %d: herald up", up.url, up.cmd.Process.Pid))
	workspace := filepath.Join(real, ".herald", "workspace")
	require.Contains(t, msg, "the tools work in "+workspace)
	require.Contains(t, msg, "⚠ the tools do not see this folder ("+real+")")
	require.Contains(t, msg, "⚠ herald.yaml is not read by the server")
	require.FileExists(t, filepath.Join(workspace, "seen.txt"))
	for _, r := range model.Requests() {
		require.Equal(t, "caller-model", r.Model, "the caller's --model is the model called")
	}

	// up's folder is ignored by git, as every data folder is.
	gitignore, err := os.ReadFile(filepath.Join(real, ".herald", ".gitignore"))
	require.NoError(t, err)
	require.Contains(t, string(gitignore), "\n*\n")
	if git, err := exec.LookPath("git"); err == nil {
		require.NoError(t, exec.Command(git, "-C", real, "init", "-q").Run())
		status, err := exec.Command(git, "-C", real, "status", "--porcelain", "--untracked-files=all").Output()
		require.NoError(t, err)
		require.Equal(t, "?? herald.yaml\n", string(status), ".herald/ never shows in git status")
	}
}

// A second `herald up` on a folder in use stops at once, naming the holder.
func TestSecondUpOnAFolderInUseStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	up := startUserUp(t, ctx, dir, nil)
	var errOut bytes.Buffer
	second := heraldCmd(t, ctx, dir, nil, "up", "--nats-listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--http", "")
	second.Stderr = &errOut
	require.Equal(t, 1, exitCode(second.Run()), "stderr: %s", &errOut)
	require.Contains(t, errOut.String(), fmt.Sprintf("is in use by process %d (herald up", up.cmd.Process.Pid))
}

// Runs started together on one folder: exactly one takes it, every other
// stops at once naming it; none opens the store beside it.
func TestRunsStartedTogetherShareNoFolder(t *testing.T) {
	release := make(chan struct{})
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		<-release
		return scripted.Text("the one answer")
	})
	require.NoError(t, err)
	defer model.Close()
	var once bool
	defer func() {
		if !once {
			close(release)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}
	const n = 4
	type ended struct {
		code           int
		stdout, stderr string
	}
	results := make(chan ended, n)
	for i := 0; i < n; i++ {
		var out, errOut heraldtest.SyncBuffer
		cmd := heraldCmd(t, ctx, dir, env, "run", fmt.Sprintf("task %d", i))
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Start())
		go func() {
			err := cmd.Wait()
			results <- ended{exitCode(err), out.String(), errOut.String()}
		}()
	}
	// Every run but the holder ends on its own, while the holder waits for
	// the model.
	for i := 0; i < n-1; i++ {
		select {
		case r := <-results:
			require.Equal(t, 1, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, "is in use by process")
		case <-ctx.Done():
			t.Fatal("a run on a folder in use waited instead of stopping")
		}
	}
	require.Eventually(t, func() bool { return len(model.Requests()) == 1 }, 60*time.Second, 20*time.Millisecond)
	close(release)
	once = true
	r := <-results
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Equal(t, "the one answer\n", r.stdout)
	require.Len(t, model.Requests(), 1, "one run reached the model")
}

// A lock file left by a process that died (kill -9 leaves it, with its
// pid and NATS address) holds nothing: the kernel dropped the lock with the
// process, so the next run takes the folder instead of trusting the file.
func TestAStaleLockFileDoesNotHoldTheFolder(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("taken over")))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".herald"), 0o755))
	writeFile(t, filepath.Join(dir, ".herald", "herald.lock"),
		`{"pid":999999,"command":"herald up","nats":"nats://127.0.0.1:1","workspace":"/elsewhere"}`+"\n")
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}, "run", "hello")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "stderr: %s", &errOut)
	require.Equal(t, "taken over\n", out.String())
	require.NotContains(t, errOut.String(), "attached", "a dead holder's address is not trusted")
}
