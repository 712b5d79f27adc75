package toolrunner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// inBubblewrap turns the command runCommand built into the same command
// under bwrap with no network and only /usr, the system folders and the
// workspace visible — the shape of the tool runner's sandbox — so the test
// shows a program and its pipes work where terminal commands will run.
func inBubblewrap(t *testing.T, workspace string) func(*exec.Cmd) {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	require.NoError(t, err, "bubblewrap (bwrap) is needed: apt-get install bubblewrap")
	args := []string{bwrap, "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
	dirs, _ := filepath.Glob("/lib*")
	for _, p := range append([]string{"/bin", "/sbin"}, dirs...) {
		if target, err := os.Readlink(p); err == nil {
			args = append(args, "--symlink", target, p)
		} else if _, err := os.Stat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	args = append(args, "--bind", workspace, workspace, "--chdir", workspace)
	return func(cmd *exec.Cmd) {
		cmd.Args = append(args, append([]string{"--"}, cmd.Args...)...)
		cmd.Path = bwrap
	}
}

func TestExecuteCodeRunsInsideANoNetworkSandbox(t *testing.T) {
	h := newHarness(t)
	c := &call{req: h.request("execute_code", map[string]any{}), ws: workspace{root: h.cfg.WorkspaceRoot}}
	program := `
import os, socket, sys
from herald_tools import write_file, read_file
print("python", sys.executable)
write_file(path="from-sandbox.txt", content="through the pipes")
print(read_file(path="from-sandbox.txt"))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("network: reachable")
except OSError:
    print("network: none")
print("home visible:", os.path.exists(os.path.expanduser("~/.pyenv")))
`
	br, err := h.svc.openBridge(context.Background(), c, program)
	require.NoError(t, err)
	env := append(h.svc.secrets.scrubbedEnv(), "HERALD_TOOLS_SOURCE="+heraldToolsSource, "PATH=/usr/bin:/bin")
	out, code, err := runCommand(context.Background(), h.cfg.WorkspaceRoot, programCommand(h.cfg.Code.Python), env,
		30*time.Second, 1<<16, inBubblewrap(t, h.cfg.WorkspaceRoot), br.attach)
	br.close()
	require.NoError(t, err)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "python /usr/bin/python3")
	require.Contains(t, out, "through the pipes")
	require.Contains(t, out, "network: none")
	require.Contains(t, out, "home visible: False")
	require.Equal(t, "through the pipes", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "from-sandbox.txt")))))
}
