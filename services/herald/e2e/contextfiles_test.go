package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

const (
	runnerEnvSecret = "RUNNER-ENV-SECRET-91b2"
	shadowSecret    = "SHADOW-SECRET-0c7e"
	acmeRules       = "ACME-PRIVATE-RULES-5d1f"
)

// warnings collects the warning events of every session.
type warnings struct {
	mu   sync.Mutex
	seen map[string][]proto.Event
}

func collectWarnings(t *testing.T, nc *nats.Conn) *warnings {
	w := &warnings{seen: map[string][]proto.Event{}}
	sub, err := nc.Subscribe("herald.session.*.events", func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == proto.EventWarning {
			w.mu.Lock()
			w.seen[ev.SessionID] = append(w.seen[ev.SessionID], ev)
			w.mu.Unlock()
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return w
}

// of returns the session's warnings by file ("" for one about no file).
func (w *warnings) of(sid string) map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for _, ev := range w.seen[sid] {
		out[ev.File] = ev.Message
	}
	return out
}

// Issue 26 cause 1, in a split deployment: the loop runs in its own process
// with no workspace mounted (its working folder and data folder are empty),
// the tool runner in another with the workspace. Context files reach the
// prompt from the runner; the attacks a model with a terminal can plant
// (a symlink to /proc/self/environ, to a secret file outside, to another
// tenant's AGENTS.md, a FIFO) are skipped, named in warning events, and
// none of their content reaches the model; with no runner of the session's
// pool the turn goes on without context files and says so.
func TestContextFilesComeFromTheRunnerInASplitDeployment(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("ok")))
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	writeFile(t, filepath.Join(ws, "proj", "AGENTS.md"), "Run tests with `make check`.")
	shadow := filepath.Join(dir, "shadow")
	writeFile(t, shadow, shadowSecret)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "attack"), 0o755))
	require.NoError(t, os.Symlink("/proc/self/environ", filepath.Join(ws, "attack", "AGENTS.md")))
	require.NoError(t, os.Symlink(shadow, filepath.Join(ws, "attack", "HERALD.md")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, "attack", "CLAUDE.md"), 0o644))
	writeFile(t, filepath.Join(ws, "tenants", "acme", "proj", "AGENTS.md"), acmeRules)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "tenants", "globex", "proj"), 0o755))
	require.NoError(t, os.Symlink("../../acme/proj/AGENTS.md", filepath.Join(ws, "tenants", "globex", "proj", ".cursorrules")))

	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"})
	warned := collectWarnings(t, c.NC)
	c.env["HERALD_DATA_DIR"] = filepath.Join(dir, "loop-data")
	c.serve("loop", "gateway", "memory", "compressor")
	c.env["HERALD_DATA_DIR"] = filepath.Join(dir, "runner-data")
	c.env["HERALD_WORKSPACE"] = ws
	c.env["PLANTED_SECRET"] = runnerEnvSecret
	c.serve("toolrunner")
	// Tasks wait in their stream for a loop; a context-file request does not
	// wait for a runner, so the runner is up before the first session starts.
	require.Eventually(t, func() bool {
		_, err := c.NC.Request(bus.ContextFiles(bus.DefaultPool), []byte(`{"session_id":"probe","workspace":"probe"}`), time.Second)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the tool runner never answered")

	run := func(subject string, task proto.Task) string {
		t.Helper()
		ctxPublish(t, c, subject, task)
		res := waitResult(t, c, task, 60*time.Second)
		require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
		var sys string
		for _, r := range model.Requests() {
			if r.FirstUser() == task.Prompt {
				sys = r.Messages[0].Text()
			}
		}
		require.NotEmpty(t, sys, "the model was asked")
		return sys
	}

	plain := NewTask("read the project's rules")
	plain.Workspace = "proj"
	require.Contains(t, run(bus.TasksSubject, plain), "Run tests with `make check`.", "AGENTS.md from the runner's workspace")
	require.Empty(t, warned.of(plain.SessionID))

	attack := NewTask("a session in the attacked workspace")
	attack.Workspace = "attack"
	sys := run(bus.TasksSubject, attack)
	require.NotContains(t, sys, "# Project context files")
	require.Eventually(t, func() bool { return len(warned.of(attack.SessionID)) == 3 }, 10*time.Second, 20*time.Millisecond,
		"warnings: %v", warned.of(attack.SessionID))
	got := warned.of(attack.SessionID)
	for _, name := range []string{"AGENTS.md", "HERALD.md", "CLAUDE.md"} {
		require.Contains(t, got[name], "context file "+name+" skipped", "%v", got)
	}

	globex := NewTask("globex: what are the rules")
	globex.Workspace = "proj"
	run(bus.TenantTasks("globex"), globex)
	require.Eventually(t, func() bool { return warned.of(globex.SessionID)[".cursorrules"] != "" }, 10*time.Second, 20*time.Millisecond)

	nowhere := NewTask("a session of a pool no runner serves")
	nowhere.Pool = "nowhere"
	run(bus.TasksSubject, nowhere)
	require.Eventually(t, func() bool { return warned.of(nowhere.SessionID)[""] != "" }, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, warned.of(nowhere.SessionID)[""], `no tool runner of pool "nowhere"`)

	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			for _, secret := range []string{runnerEnvSecret, shadowSecret, acmeRules} {
				require.NotContains(t, m.Text(), secret, "a secret reached the model")
			}
		}
	}
}

func ctxPublish(t *testing.T, c *cluster, subject string, task proto.Task) {
	t.Helper()
	data, err := json.Marshal(task)
	require.NoError(t, err)
	_, err = c.JS.Publish(t.Context(), subject, data)
	require.NoError(t, err)
}

// A user running `herald run` in a folder where a model planted AGENTS.md as
// a symlink to /proc/self/environ is told, and the process's environment
// never reaches the model; the folder's real context files still do.
func TestRunWarnsOfAContextFileThatLeadsOutOfTheWorkspace(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("ok")))
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/proc/self/environ", filepath.Join(dir, "AGENTS.md")))
	writeFile(t, filepath.Join(dir, "HERALD.md"), "Indent with tabs.")
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, t.Context(), dir, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"PLANTED_SECRET": runnerEnvSecret}, "run", "hello")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "stderr: %s", errOut.String())
	require.Contains(t, errOut.String(), "· warning: context file AGENTS.md skipped: AGENTS.md could not be opened inside the workspace")
	reqs := model.Requests()
	require.NotEmpty(t, reqs)
	require.Contains(t, reqs[0].Messages[0].Text(), "Indent with tabs.")
	for _, m := range reqs[0].Messages {
		require.NotContains(t, m.Text(), runnerEnvSecret)
	}
}
