package toolrunner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// Each test here tries to break one promise of the sandbox from inside a
// terminal call, the way a hostile or confused model would.

// inWorkspace runs command as a terminal call in the task workspace "mine",
// approvals off: these tests probe the sandbox itself with whatever a
// hostile command would run (inline python, node -e), which approvals
// would otherwise stop before it reached the sandbox.
func (h *harness) inWorkspace(command string) terminalReply {
	h.t.Helper()
	req := h.request("terminal", map[string]any{"command": command})
	req.Workspace = "mine"
	req.ApprovalsMode = ApprovalsOff
	return terminalOf(h.t, h.run(req))
}

func TestSandboxCannotReadFilesOutsideTheWorkspace(t *testing.T) {
	data := t.TempDir() // the runner's data folder: checkpoints, credentials
	h := newHarness(t, func(c *Config) { c.CheckpointDir = filepath.Join(data, "checkpoints") })
	secret := fmt.Sprintf("the-secret-%d", time.Now().UnixNano())
	planted := map[string]string{
		"data folder":       filepath.Join(data, "nats.creds"),
		"/var/tmp":          filepath.Join("/var/tmp", fmt.Sprintf("herald-planted-%d", time.Now().UnixNano())),
		"sibling workspace": filepath.Join(h.cfg.WorkspaceRoot, "theirs", "notes.txt"),
		"workspace root":    filepath.Join(h.cfg.WorkspaceRoot, "root.txt"),
	}
	for _, p := range planted {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(secret), 0o644))
		t.Cleanup(func() { _ = os.Remove(p) })
	}
	for where, p := range planted {
		r := h.inWorkspace("cat " + p + "; cat ../" + filepath.Base(p) + "; cat ../theirs/notes.txt")
		require.NotContains(t, r.Output, secret, "a command read a file planted in the %s", where)
	}
	// Nothing of the host beyond the allow-list is even there.
	r := h.inWorkspace("for d in /var /srv /opt /home /root /etc/shadow /etc/hostname " + data + "; do test -e $d && echo SEEN $d; done; echo checked")
	require.Equal(t, "checked\n", r.Output)
	// What is promised is there: programs, libraries, the workspace.
	r = h.inWorkspace("echo mine > own.txt && cat own.txt && ls /usr/bin/bash && pwd")
	require.Equal(t, "mine\n/usr/bin/bash\n"+filepath.Join(h.cfg.WorkspaceRoot, "mine")+"\n", r.Output)
}

func TestSandboxCannotWriteOutsideTheWorkspace(t *testing.T) {
	h := newHarness(t)
	victim := filepath.Join("/var/tmp", fmt.Sprintf("herald-write-%d", time.Now().UnixNano()))
	sibling := filepath.Join(h.cfg.WorkspaceRoot, "theirs")
	require.NoError(t, os.MkdirAll(sibling, 0o755))
	// Should the sandbox fail, what it let through is not left on the host.
	t.Cleanup(func() {
		for _, p := range []string{victim, "/usr/herald-planted", "/tmp/private"} {
			_ = os.Remove(p)
		}
	})
	r := h.inWorkspace(strings.Join([]string{
		"echo x > " + victim, "echo x > ../theirs/planted", "echo x > /usr/herald-planted",
		"mkdir -p /var/tmp && echo x > " + victim, "echo x > /tmp/private && cat /tmp/private",
	}, "; "))
	require.Contains(t, r.Output, "x", "the private /tmp is writable")
	require.NoFileExists(t, victim)
	require.NoFileExists(t, filepath.Join(sibling, "planted"))
	require.NoFileExists(t, "/usr/herald-planted")
	require.NoFileExists(t, "/tmp/private", "the sandbox's /tmp is its own")
}

func TestSandboxHasNoNetworkUnlessAllowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("echo hi > /dev/tcp/127.0.0.1/%d && echo CONNECTED", port)

	h := newHarness(t)
	r := h.inWorkspace(connect)
	require.NotContains(t, r.Output, "CONNECTED")
	require.Never(t, func() bool { return accepted.Load() > 0 }, 300*time.Millisecond, 20*time.Millisecond)

	open := newHarness(t, func(c *Config) { c.Sandbox.Network = true })
	r = open.inWorkspace(connect)
	require.Contains(t, r.Output, "CONNECTED", "network: true lets commands connect")
	require.Eventually(t, func() bool { return accepted.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestSandboxSeesNoHostProcess(t *testing.T) {
	h := newHarness(t)
	self, err := os.Executable()
	require.NoError(t, err)
	r := h.inWorkspace("cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls -d /proc/[0-9]* | wc -l")
	require.NotContains(t, r.Output, filepath.Base(self), "the runner's own process is visible")
	fields := strings.Fields(r.Output)
	var n int
	_, err = fmt.Sscan(fields[len(fields)-1], &n)
	require.NoError(t, err, r.Output)
	require.LessOrEqual(t, n, 6, "more processes than the call's own: %s", r.Output)
}

func TestSandboxEndsEveryProcessWithTheCall(t *testing.T) {
	h := newHarness(t)
	r := h.inWorkspace(heartbeat("beat") + "setsid sh -c 'while :; do echo $RANDOM > beat2; sleep 0.02; done' & disown -a; nohup sleep 1000 & until [ -e beat2 ]; do sleep 0.01; done; echo left")
	require.Equal(t, "left\n", r.Output)
	ws := filepath.Join(h.cfg.WorkspaceRoot, "mine")
	requireHeartbeatStops(t, filepath.Join(ws, "beat"), "a background loop outlived the call")
	requireHeartbeatStops(t, filepath.Join(ws, "beat2"), "a setsid'd, disowned loop outlived the call")
}

func TestSandboxProcessLimitHolds(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Sandbox.Processes = 16 })
	// dash gives up at the first refused fork (bash would retry for long);
	// the shell then counts the call's processes with builtins only (a glob
	// over its /proc), which need no fork.
	r := h.inWorkspace(`sh -c 'for i in $(seq 40); do sleep 5 & done' 2>/dev/null; set -- /proc/[0-9]*; echo $#`)
	var n int
	_, err := fmt.Sscan(r.Output, &n)
	require.NoError(t, err, r.Output)
	require.LessOrEqual(t, n, 16, "the call ran %d processes with a limit of 16", n)
	require.Greater(t, n, 8, "the loop did start processes up to the limit")
	// Below the limit, work goes on as usual.
	r = h.inWorkspace(`for i in 1 2 3 4; do sleep 0.1 & done; wait; echo fine`)
	require.Equal(t, "fine\n", r.Output)
}

func TestSandboxMemoryAndCPULimitsHold(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Sandbox.MemoryMB = 64 })
	// bash holds the bytes in a variable: no program beyond coreutils needed.
	hold := func(mb int) string { return fmt.Sprintf(`x=$(head -c %dm /dev/zero | tr '\0' a); echo ${#x}`, mb) }
	r := h.inWorkspace(hold(1))
	require.Equal(t, "1048576\n", r.Output, "a small allocation works")
	r = h.inWorkspace(hold(256))
	require.NotContains(t, r.Output, "268435456", "256 MB held under a 64 MB limit")
	require.NotEqual(t, 0, r.ExitCode)

	busy := newHarness(t, func(c *Config) { c.Sandbox.CPUSeconds = 1 })
	start := time.Now()
	r = busy.inWorkspace(`while :; do :; done`)
	require.Less(t, time.Since(start), 15*time.Second, "a busy loop outran its 1 CPU second")
	require.NotEqual(t, 0, r.ExitCode)
}

func TestRunnerRefusesToStartWithoutBwrapUnlessModeNone(t *testing.T) {
	b := heraldtest.StartBus(t)
	t.Setenv("PATH", t.TempDir()) // no bwrap on PATH
	h := newIdleHarness(t, b)
	_, err := New(h.cfg, depsFor(b.NC, b.JS, t))
	require.ErrorIs(t, err, ErrNoSandbox)
	require.Contains(t, err.Error(), "sandbox.mode: none")

	var logs bytes.Buffer
	deps := depsFor(b.NC, b.JS, t)
	deps.Log = zerolog.New(&logs)
	cfg := h.cfg
	cfg.Sandbox.Mode = config.SandboxNone
	svc, err := New(cfg, deps)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	require.Equal(t, 1, strings.Count(logs.String(), "sandbox.mode is none"), logs.String())
}

func TestSandboxOverridesPerPool(t *testing.T) {
	yes := true
	s := config.DefaultSandbox()
	s.ReadOnly = []string{"/srv/models"}
	s.Pools = map[string]config.SandboxOverride{"gpu": {Network: &yes, MemoryMB: 16384, ReadOnly: []string{"/opt/cuda"}}}
	gpu := s.ForPool("gpu")
	require.True(t, gpu.Network)
	require.Equal(t, 16384, gpu.MemoryMB)
	require.Equal(t, 256, gpu.Processes)
	require.Equal(t, []string{"/srv/models", "/opt/cuda"}, gpu.ReadOnly)
	require.False(t, s.ForPool("default").Network)
	s.Pools["bad"] = config.SandboxOverride{Mode: "docker"}
	require.ErrorContains(t, s.Validate(), "sandbox.pools.bad.mode")
}

func TestUnboundTaskAtTheRootDoesNotReachTenantsWorkspaces(t *testing.T) {
	h := newHarness(t)
	theirs := filepath.Join(h.cfg.WorkspaceRoot, "tenants", "acme", "plans.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(theirs), 0o755))
	require.NoError(t, os.WriteFile(theirs, []byte("acme-only"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "ours.txt"), []byte("shared"), 0o644))

	// The task names no workspace: its tools work at the runner's root.
	res := h.call("read_file", map[string]any{"path": "tenants/acme/plans.txt"})
	require.Equal(t, "denied", res.GetStatus(), res.GetContent())
	res = h.call("write_file", map[string]any{"path": "tenants/acme/plans.txt", "content": "overwritten"})
	require.Equal(t, "denied", res.GetStatus(), res.GetContent())
	res = h.call("search_files", map[string]any{"pattern": "only|shared"})
	require.Contains(t, res.GetContent(), "ours.txt")
	require.NotContains(t, res.GetContent(), "acme-only")
	r := terminalOf(t, h.call("terminal", map[string]any{"command": "cat tenants/acme/plans.txt; ls tenants; cat ours.txt"}))
	require.NotContains(t, r.Output, "acme-only")
	require.Contains(t, r.Output, "shared")
	require.Equal(t, "acme-only", string(must(os.ReadFile(theirs))))

	// The tenant's own call (workspace tenants/acme, as the loop composes it) reads it.
	req := h.request("read_file", map[string]any{"path": "plans.txt"})
	req.Workspace = "tenants/acme"
	require.Contains(t, h.run(req).GetContent(), "acme-only")
}

func TestSandboxHandsExtraFilesToTheCommand(t *testing.T) {
	// execute_code talks to its program over inherited pipes: they must
	// reach the command through bwrap.
	h := newHarness(t)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	out, code, err := h.svc.runCommand(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), "echo through-fd-3 >&3", nil, 10*time.Second, 1024,
		func(cmd *exec.Cmd) { cmd.ExtraFiles = []*os.File{w} })
	require.NoError(t, err)
	require.Equal(t, 0, code, out)
	require.NoError(t, w.Close())
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, "through-fd-3\n", string(got))
}

func TestDataFolderInsideTheWorkspaceStaysOutOfReach(t *testing.T) {
	// herald run: the workspace is the current directory, its data folder
	// (the NATS store, checkpoints) ./.herald inside it.
	root := t.TempDir()
	data := filepath.Join(root, ".herald")
	h := newHarness(t, func(c *Config) { c.WorkspaceRoot, c.DataDir = root, data })
	store := filepath.Join(data, "jetstream", "msgs.blk")
	require.NoError(t, os.MkdirAll(filepath.Dir(store), 0o755))
	require.NoError(t, os.WriteFile(store, []byte("transcripts-of-every-session"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "main.go"), []byte("package main"), 0o644))

	res := h.call("read_file", map[string]any{"path": ".herald/jetstream/msgs.blk"})
	require.Equal(t, "denied", res.GetStatus(), res.GetContent())
	res = h.call("write_file", map[string]any{"path": ".herald/jetstream/msgs.blk", "content": "corrupted"})
	require.Equal(t, "denied", res.GetStatus(), res.GetContent())
	res = h.call("search_files", map[string]any{"pattern": "transcripts|package"})
	require.Contains(t, res.GetContent(), "main.go")
	require.NotContains(t, res.GetContent(), "transcripts-of-every-session")
	r := terminalOf(t, h.call("terminal", map[string]any{"command": "cat .herald/jetstream/msgs.blk; echo corrupted > .herald/x; ls -a .herald; cat main.go"}))
	require.NotContains(t, r.Output, "transcripts-of-every-session")
	require.Contains(t, r.Output, "package main")
	require.Equal(t, "transcripts-of-every-session", string(must(os.ReadFile(store))))
	require.NoFileExists(t, filepath.Join(data, "x"))
}
