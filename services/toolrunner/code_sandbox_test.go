package toolrunner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The program runs through the runner's own command path, so under its
// sandbox (bwrap by default): no network, only /usr, the system folders and
// the workspace visible; its pipes to the runner must still work there.
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
	require.True(t, h.svc.sandbox.Confined(), "the runner's default sandbox is bwrap")
	out, code, err := h.svc.runCommand(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), programCommand(h.cfg.Code.Python), env,
		30*time.Second, 1<<16, br.attach)
	br.close()
	require.NoError(t, err)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "python /usr/bin/python3")
	require.Contains(t, out, "through the pipes")
	require.Contains(t, out, "network: none")
	require.Contains(t, out, "home visible: False")
	require.Equal(t, "through the pipes", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "from-sandbox.txt")))))
}
