package toolrunner

import (
	"bytes"
	"context"
	"fmt"
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

// Each test here is an MCP server trying to break a promise of the sandbox
// it runs in: the test binary serving MCP (helperEnv=mcp), or the official
// filesystem server from npm.

// loopback is a listener on 127.0.0.1 counting the connections it accepts.
func loopback(t *testing.T) (string, *atomic.Int64) {
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
	return ln.Addr().String(), &accepted
}

// plant writes secret at p for the test's duration.
func plant(t *testing.T, p, secret string) {
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(secret), 0o644))
	t.Cleanup(func() { _ = os.Remove(p) })
}

func TestMCPServerCannotReachWhatItMustNot(t *testing.T) {
	data := t.TempDir() // the runner's data folder: NATS store, credentials
	h := newHarness(t, withTestMCPServer, func(c *Config) {
		c.DataDir, c.CheckpointDir = data, filepath.Join(data, "checkpoints")
	})
	secret := fmt.Sprintf("the-secret-%d", time.Now().UnixNano())
	planted := map[string]string{
		"data folder":              filepath.Join(data, "nats.creds"),
		"/var/tmp":                 filepath.Join("/var/tmp", fmt.Sprintf("herald-mcp-planted-%d", time.Now().UnixNano())),
		"another tenant workspace": filepath.Join(h.cfg.WorkspaceRoot, "tenants", "other", "notes.txt"),
	}
	for where, p := range planted {
		plant(t, p, secret)
		got := h.call("mcp_demo_read", map[string]any{"path": p}).GetContent()
		require.NotContains(t, got, secret, "the MCP server read a file planted in the %s", where)
		require.True(t, strings.HasPrefix(got, "refused: "), got)
	}
	victim := filepath.Join("/var/tmp", fmt.Sprintf("herald-mcp-write-%d", time.Now().UnixNano()))
	t.Cleanup(func() { _ = os.Remove(victim) })
	require.True(t, strings.HasPrefix(h.call("mcp_demo_write", map[string]any{"path": victim, "text": "x"}).GetContent(), "refused: "))
	require.NoFileExists(t, victim, "the MCP server wrote outside its workspace")

	addr, accepted := loopback(t)
	got := h.call("mcp_demo_dial", map[string]any{"addr": addr}).GetContent()
	require.True(t, strings.HasPrefix(got, "refused: "), got)
	require.Never(t, func() bool { return accepted.Load() > 0 }, 300*time.Millisecond, 20*time.Millisecond)

	procs := h.call("mcp_demo_procs", map[string]any{}).GetContent()
	require.NotContains(t, procs, "-test.", "the MCP server sees the runner's process")
	require.LessOrEqual(t, len(strings.Split(procs, "\n")), 3, "more processes than the server's own: %s", procs)

	// What is promised is there: the workspace root, read-write.
	own := filepath.Join(h.cfg.WorkspaceRoot, "from-mcp.txt")
	require.Equal(t, "written", h.call("mcp_demo_write", map[string]any{"path": own, "text": "made inside"}).GetContent())
	body, err := os.ReadFile(own)
	require.NoError(t, err)
	require.Equal(t, "made inside", string(body))
	plant(t, filepath.Join(h.cfg.WorkspaceRoot, "shared.txt"), "for the server")
	require.Equal(t, "read: for the server", h.call("mcp_demo_read", map[string]any{"path": filepath.Join(h.cfg.WorkspaceRoot, "shared.txt")}).GetContent())
}

// A server that must call an API gets the network on its own entry while
// commands stay without.
func TestMCPServerNetworkIsItsOwnOverride(t *testing.T) {
	addr, accepted := loopback(t)
	yes := true
	h := newHarness(t, func(c *Config) {
		c.MCPServers = map[string]config.MCPServer{
			"api":    {Command: os.Args[0], Env: map[string]string{helperEnv: "mcp"}, Sandbox: config.MCPSandbox{Network: &yes}},
			"closed": {Command: os.Args[0], Env: map[string]string{helperEnv: "mcp"}},
		}
	})
	require.Equal(t, "connected", h.call("mcp_api_dial", map[string]any{"addr": addr}).GetContent())
	require.Eventually(t, func() bool { return accepted.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.True(t, strings.HasPrefix(h.call("mcp_closed_dial", map[string]any{"addr": addr}).GetContent(), "refused: "))
	require.NotContains(t, h.inWorkspace("echo hi > /dev/tcp/"+strings.Replace(addr, ":", "/", 1)+" && echo CONNECTED").Output, "CONNECTED")
	require.Equal(t, int64(1), accepted.Load())
}

// `sandbox: none` is an explicit opt-out, warned about once at start.
func TestMCPServerSandboxNoneIsUnconfinedAndWarned(t *testing.T) {
	b := heraldtest.StartBus(t)
	h := newIdleHarness(t, b, func(c *Config) {
		c.MCPServers = map[string]config.MCPServer{
			"legacy": {Command: os.Args[0], Env: map[string]string{helperEnv: "mcp"}, Sandbox: config.MCPSandbox{None: true}},
		}
	})
	var logs bytes.Buffer
	deps := depsFor(b.NC, b.JS, t)
	deps.Log = zerolog.New(&logs)
	svc, err := New(h.cfg, deps)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	h.svc = svc
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	require.Equal(t, 1, strings.Count(logs.String(), "mcp_servers.legacy.sandbox is none"), logs.String())

	p := filepath.Join("/var/tmp", fmt.Sprintf("herald-mcp-unconfined-%d", time.Now().UnixNano()))
	plant(t, p, "host file")
	require.Equal(t, "read: host file", h.call("mcp_legacy_read", map[string]any{"path": p}).GetContent())
}

// mcpFilesystemVersion is the release of the official filesystem server
// (npm @modelcontextprotocol/server-filesystem) the tests run.
const mcpFilesystemVersion = "2026.8.31"

// mcpFilesystemServer finds the server's program: $HERALD_TEST_MCP_FILESYSTEM
// (.ci/run installs it with npm), else it installs the pinned release with
// npm into the user's cache (outside every folder the sandbox shows, so the
// test also shows the install folder is found), so the test runs or fails
// saying why, never skips.
func mcpFilesystemServer(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HERALD_TEST_MCP_FILESYSTEM"); p != "" {
		require.FileExists(t, p, "HERALD_TEST_MCP_FILESYSTEM names no file")
		return p
	}
	require.Empty(t, os.Getenv("CI"), "HERALD_TEST_MCP_FILESYSTEM is not set: .ci/run installs the server with npm")
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	prefix := filepath.Join(cache, "herald-test", "mcp-server-filesystem-"+mcpFilesystemVersion)
	bin := filepath.Join(prefix, "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	out, err := exec.Command("npm", "install", "--prefix", prefix, "--no-audit", "--no-fund",
		"@modelcontextprotocol/server-filesystem@"+mcpFilesystemVersion).CombinedOutput()
	require.NoError(t, err, "installing the MCP filesystem server with npm (set HERALD_TEST_MCP_FILESYSTEM to skip this): %s", out)
	return bin
}

// The official filesystem server, installed by npm outside the system
// folders, starts in the sandbox, lists its tools and works in the
// workspace; a folder outside the workspace that it is told to serve is
// not there for it.
func TestMCPServerFromNpmRunsInTheSandbox(t *testing.T) {
	bin := mcpFilesystemServer(t)
	outside := filepath.Join("/var/tmp", fmt.Sprintf("herald-mcp-fs-%d", time.Now().UnixNano()))
	plant(t, filepath.Join(outside, "secret.txt"), "host secret")
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	h := newIdleHarness(t, heraldtest.StartBus(t))
	h.cfg.MCPServers = map[string]config.MCPServer{"fs": {Command: bin, Args: []string{h.cfg.WorkspaceRoot, outside}}}
	h.svc = h.startRunner("runner-fs", h.cfg)

	for _, tool := range []string{"mcp_fs_read_text_file", "mcp_fs_write_file", "mcp_fs_list_allowed_directories"} {
		_, _, ok := h.svc.mcp.lookup(tool)
		require.True(t, ok, "the server offers %s", tool)
	}
	dirs := h.call("mcp_fs_list_allowed_directories", map[string]any{})
	require.Equal(t, "ok", dirs.GetStatus(), dirs.GetContent())
	require.Contains(t, dirs.GetContent(), h.cfg.WorkspaceRoot)
	require.NotContains(t, dirs.GetContent(), outside, "a folder outside the workspace is there for the server")

	target := filepath.Join(h.cfg.WorkspaceRoot, "notes.md")
	res := h.call("mcp_fs_write_file", map[string]any{"path": target, "content": "# from npm\n"})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	body, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "# from npm\n", string(body))
	res = h.call("mcp_fs_read_text_file", map[string]any{"path": target})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "# from npm")

	res = h.call("mcp_fs_read_text_file", map[string]any{"path": filepath.Join(outside, "secret.txt")})
	require.NotContains(t, res.GetContent(), "host secret")
	require.True(t, res.GetIsError(), res.GetContent())
}

// A server that needs a file the runner cannot guess fails to start saying
// what it said and where to allow it; its own read_only lets it start.
func TestMCPServerReadOnlyLetsItReadWhatItNeeds(t *testing.T) {
	cfgDir := filepath.Join("/var/tmp", fmt.Sprintf("herald-mcp-cfg-%d", time.Now().UnixNano()))
	plant(t, filepath.Join(cfgDir, "server.conf"), "setting=1")
	t.Cleanup(func() { _ = os.RemoveAll(cfgDir) })
	script := filepath.Join(t.TempDir(), "start-server")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ncat "+filepath.Join(cfgDir, "server.conf")+" >/dev/null || exit 3\nexec \"$1\"\n"), 0o755))
	server := config.MCPServer{Command: script, Args: []string{os.Args[0]}, Env: map[string]string{helperEnv: "mcp"}}

	h := newIdleHarness(t, heraldtest.StartBus(t))
	h.cfg.MCPServers = map[string]config.MCPServer{"conf": server}
	nc, js := h.bus.Connect(t, "no-conf")
	svc, err := New(h.cfg, depsFor(nc, js, t))
	require.NoError(t, err)
	err = svc.Start(context.Background())
	require.ErrorContains(t, err, "server.conf: No such file or directory")
	require.ErrorContains(t, err, "sandbox.read_only")
	require.NoError(t, svc.Shutdown(context.Background()))

	server.Sandbox.ReadOnly = []string{cfgDir}
	h.cfg.MCPServers = map[string]config.MCPServer{"conf": server}
	h.svc = h.startRunner("with-conf", h.cfg)
	require.Equal(t, "echo: configured", h.call("mcp_conf_echo", map[string]any{"text": "configured"}).GetContent())
}

// Where a server's program was installed is found from its path: npm's
// node_modules folder, a Python virtual environment, else the file alone;
// a script's interpreter the same way.
func TestMCPInstallFoldersFollowTheProgram(t *testing.T) {
	root := t.TempDir()
	write := func(p, body string) string {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
		return p
	}
	// npm install --prefix P: P/node_modules/.bin/x -> ../pkg/dist/index.js
	index := write(filepath.Join(root, "npm", "node_modules", "@scope", "pkg", "dist", "index.js"), "#!/usr/bin/env node\n")
	link := filepath.Join(root, "npm", "node_modules", ".bin", "x")
	require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
	require.NoError(t, os.Symlink(index, link))
	require.Equal(t, []string{filepath.Join(root, "npm", "node_modules")}, notSystem(installFolders([]string{link})))
	// node <script>: the script's package folder
	require.Contains(t, installFolders([]string{"/usr/bin/env", index}), filepath.Join(root, "npm", "node_modules"))

	// a virtual environment: its folder, and the interpreter its script names
	venv := filepath.Join(root, "venv")
	write(filepath.Join(venv, "pyvenv.cfg"), "home = /usr/bin\n")
	python := write(filepath.Join(root, "python", "bin", "python3"), "binary")
	server := write(filepath.Join(venv, "bin", "mcp-server"), "#!"+python+"\nimport server\n")
	require.Equal(t, []string{venv, python}, installFolders([]string{server}))

	// a lone program; a folder given as an argument is not shown
	lone := write(filepath.Join(root, "tools", "mcp-go"), "binary")
	require.Equal(t, []string{lone}, installFolders([]string{lone, root, "--flag"}))
}

// notSystem drops the system folders' paths (node, python on PATH).
func notSystem(paths []string) []string {
	var out []string
	for _, p := range paths {
		if !strings.HasPrefix(p, "/usr/") && !strings.HasPrefix(p, "/bin/") {
			out = append(out, p)
		}
	}
	return out
}

// What a server that failed to start wrote is shown to the operator, but
// never the values its entry handed it (its API key).
func TestMCPServerStartErrorHidesItsOwnKey(t *testing.T) {
	h := newIdleHarness(t, heraldtest.StartBus(t))
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "start.sh"), []byte("#!/bin/sh\necho \"cannot log in with $SEARCH_TOKEN\" >&2\nexit 1\n"), 0o755))
	h.cfg.MCPServers = map[string]config.MCPServer{"search": {Command: "./start.sh", Env: map[string]string{"SEARCH_TOKEN": "tok-0123456789"}}}
	nc, js := h.bus.Connect(t, "keyed")
	svc, err := New(h.cfg, depsFor(nc, js, t))
	require.NoError(t, err)
	err = svc.Start(context.Background())
	require.ErrorContains(t, err, "cannot log in with [redacted]")
	require.NotContains(t, err.Error(), "tok-0123456789")
	require.NoError(t, svc.Shutdown(context.Background()))
}
