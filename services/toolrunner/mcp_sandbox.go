package toolrunner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/redact"
)

// ServerCommand returns the command that starts MCP server srv with its
// working folder dir (the runner's workspace root) read-write and env as
// its whole environment. The server gets the sandbox of every command: the
// system folders and the read_only paths read-only, a private /tmp, no
// host process, no network unless sandbox.network or its own
// sandbox.network allows it, the CPU, memory and process limits, and it
// dies with the runner. Its install folder is made visible read-only too
// (see installFolders). With `sandbox: none`, or sandbox.mode none, it runs
// unconfined. release frees the server's cgroup and kills what is left of
// it; call it once the server has stopped.
func (sb *Sandbox) ServerCommand(srv config.MCPServer, dir string, env []string) (*exec.Cmd, func(), error) {
	program := srv.Command
	if strings.ContainsRune(program, filepath.Separator) && !filepath.IsAbs(program) {
		program = filepath.Join(dir, program) // as exec runs it: relative to its folder
	}
	program, err := exec.LookPath(program)
	if err != nil {
		return nil, nil, err
	}
	if !sb.Confined() || srv.Sandbox.None {
		cmd := exec.Command(program, srv.Args...)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd, func() {}, nil
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the folder as the mounts and masks name it
	}
	// A server lives longer than any task: the root's tenants' folder is
	// made now, so it is masked even for tenants who come later.
	if root, err := filepath.EvalSymlinks(sb.workspaceRoot); err == nil && root == dir {
		if err := os.MkdirAll(filepath.Join(dir, bus.TenantsFolder), 0o755); err != nil {
			return nil, nil, err
		}
	}
	own := *sb
	if srv.Sandbox.Network != nil {
		own.cfg.Network = *srv.Sandbox.Network
	}
	own.cfg.ReadOnly = slices.Concat(sb.cfg.ReadOnly, srv.Sandbox.ReadOnly)
	for _, f := range installFolders(append([]string{program}, srv.Args...)) {
		if !own.visible(f, dir) {
			own.cfg.ReadOnly = append(own.cfg.ReadOnly, f)
		}
	}
	sb.handOver(dir)
	argv := own.bwrapArgs(dir, nil)
	// The limits are set by the shell, which then becomes the server.
	argv = append(append(argv, "--", "bash", "-c", own.limitPrefix()+`exec "$0" "$@"`, program), srv.Args...)
	argv, release, err := sb.limit(argv)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = sb.procAttr()
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd, release, nil
}

// visible reports whether path p is already in the sandbox of a server
// working in dir: under a system folder, a read_only path or dir itself.
func (sb *Sandbox) visible(p, dir string) bool {
	for _, v := range slices.Concat([]string{"/usr", dir}, hostSystemDirs(), sb.cfg.ReadOnly) {
		if real, err := filepath.EvalSymlinks(v); err == nil {
			v = real
		}
		if (workspace{root: v}).contains(p) {
			return true
		}
	}
	return false
}

// installFolders are the host folders a server's program needs to read,
// found from the program (resolved on PATH) and any argument naming a file
// (`node /srv/mcp/dist/index.js`), each followed through its symlinks and,
// for a script, to its interpreter (`#!/usr/bin/env node` on PATH):
//   - a file inside a node_modules folder: the outermost node_modules
//     folder on its path, where npm puts the package and its dependencies
//     (`npm install --prefix P pkg` → P/node_modules; a global install →
//     <npm prefix>/lib/node_modules);
//   - a file in the bin folder of a Python virtual environment: the
//     environment's folder;
//   - any other file: that file alone.
//
// Whatever else a server reads goes in sandbox.read_only (for all) or
// mcp_servers.<name>.sandbox.read_only (for one server).
func installFolders(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	var add func(p string, depth int)
	add = func(p string, depth int) {
		if !filepath.IsAbs(p) || depth > 2 {
			return
		}
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() {
			return
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		for _, f := range []string{installFolder(p), installFolder(real)} {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		if interp := interpreter(real); interp != "" {
			add(interp, depth+1)
		}
	}
	for _, p := range paths {
		add(p, 0)
	}
	return out
}

func installFolder(p string) string {
	parts := strings.Split(p, string(filepath.Separator))
	if i := slices.Index(parts, "node_modules"); i > 0 {
		return strings.Join(parts[:i+1], string(filepath.Separator))
	}
	bin := filepath.Dir(p)
	if filepath.Base(bin) == "bin" {
		if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "pyvenv.cfg")); err == nil {
			return filepath.Dir(bin)
		}
	}
	return p
}

// interpreter is the program a script's #! line names, resolved on PATH
// when it is run through env; "" for anything else.
func interpreter(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	// The kernel reads 256 bytes of a #! line; a file of one endless line
	// must not be read whole.
	line, err := bufio.NewReader(io.LimitReader(f, 4<<10)).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		return ""
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0]
	}
	for _, w := range fields[1:] {
		if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
			if path, err := exec.LookPath(w); err == nil {
				return path
			}
			return ""
		}
	}
	return ""
}

// startHint is what helps the operator when a server did not start: the
// end of what it wrote to stderr (with the values its entry hands it
// redacted) and, in the sandbox, where to let it read more.
func startHint(srv config.MCPServer, sb *Sandbox, stderr string) string {
	var b strings.Builder
	if stderr = strings.TrimSpace(stderr); stderr != "" {
		var values []string
		for _, v := range srv.Env {
			if len(v) >= 4 {
				values = append(values, v)
			}
		}
		stderr = redact.New(values...).String(stderr)
		fmt.Fprintf(&b, "; it said: %s", stderr)
	}
	if sb.Confined() && !srv.Sandbox.None {
		b.WriteString("; it runs in the sandbox: a file it needs outside the system folders and its install folder goes in its sandbox.read_only")
	}
	return b.String()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
