package toolrunner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// While terminal calls run in tenant acme's workspace tenants/acme/proj, a
// goroutine exchanges (renameat2 RENAME_EXCHANGE) the tenant's folder, and
// then the workspace folder, with a symlink to tenant globex's in a tight
// loop: between the runner opening the workspace and the sandbox mounting
// it, the path names globex's folder a good part of the time. Where no
// call runs in a burst of swaps the loop rests (calm), so that calls run as
// well as fail on any machine's timing. Each call
// writes a marker and lists its folder. No marker lands in globex, no call
// sees globex's file, and the calls that ran ran in acme's folder.
func TestSandboxMountsTheHeldWorkspaceUnderSymlinkSwapRaces(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	tenants := filepath.Join(root, "tenants")
	acme, globex := filepath.Join(tenants, "acme"), filepath.Join(tenants, "globex")
	for _, d := range []string{filepath.Join(acme, "proj"), filepath.Join(globex, "proj")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(acme, "proj", "acme-plans.txt"), []byte("acme"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(globex, "proj", "globex-secret.txt"), []byte("globex"), 0o644))
	if uid, gid := h.svc.sandbox.cfg.HostIDs(); os.Geteuid() == 0 {
		// As a root runner's command is: the sandbox user may write there.
		require.NoError(t, os.Chown(filepath.Join(acme, "proj"), uid, gid))
		require.NoError(t, os.Chown(filepath.Join(globex, "proj"), uid, gid))
	}
	require.NoError(t, os.Symlink("globex", filepath.Join(tenants, "acme-swap")))
	require.NoError(t, os.Symlink("../globex/proj", filepath.Join(acme, "proj-swap")))

	stop := make(chan struct{})
	c := newCalm(256)
	rounds := swapLoop(t, stop, [][2]string{
		{acme, filepath.Join(tenants, "acme-swap")},
		{filepath.Join(acme, "proj"), filepath.Join(acme, "proj-swap")},
	}, c)
	const calls, workers = 400, 4
	var ran, refused, caught atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= calls; n = next.Add(1) {
				g := c.begin()
				o := direct(h, "tenants/acme/proj", "terminal", map[string]any{"command": fmt.Sprintf("echo %d > marker-%d && ls -a", n, n)})
				require.NotContains(t, o.content, "globex-secret", "call %d saw globex's folder", n)
				var r terminalReply
				ok := json.Unmarshal([]byte(o.content), &r) == nil && r.ExitCode == 0 && r.Error == ""
				c.end(g, ok)
				if ok {
					require.Contains(t, r.Output, "acme-plans.txt", "call %d ran somewhere else: %s", n, r.Output)
					require.Contains(t, r.Output, fmt.Sprintf("marker-%d", n))
					ran.Add(1)
				} else {
					refused.Add(1)
					// Opened, then swapped before the mount: the mount check
					// (the wrapper's or bwrap's own) stopped it.
					if strings.Contains(o.content, "changed while its sandbox was set up") || strings.Contains(o.content, "Race condition binding dirfd") {
						caught.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	swaps := rounds()

	entries, err := os.ReadDir(filepath.Join(globex, "proj"))
	require.NoError(t, err)
	for _, e := range entries {
		require.Equal(t, "globex-secret.txt", e.Name(), "a call wrote into globex's workspace")
	}
	entries, err = os.ReadDir(filepath.Join(acme, "proj"))
	require.NoError(t, err)
	markers := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "marker-") {
			markers++
		}
	}
	t.Logf("%d calls ran in acme's folder, %d refused (%d by the mount check), %d swap rounds", ran.Load(), refused.Load(), caught.Load(), swaps)
	require.Equal(t, int(ran.Load()), markers, "every call that ran wrote its marker in acme's folder")
	require.Positive(t, ran.Load(), "no call ran, not even in the swap loop's rests")
	require.Positive(t, refused.Load(), "no call was refused: the swaps never hit the window")
	require.Greater(t, swaps, c.burst, "the folders were swapped past the first burst")
}

// The workspace folder's fd the sandbox binds from is closed before the
// command starts: an open folder of the host in the command's hands would
// lead out of its mounts (openat(fd, "..")).
func TestSandboxCommandHoldsNoFolderOfTheHost(t *testing.T) {
	h := newHarness(t)
	r := h.inWorkspace(`for f in /proc/$$/fd/*; do [ -d "$f" ] && echo "folder fd $f"; done; echo checked`)
	require.Equal(t, 0, r.ExitCode, r.Output)
	require.Contains(t, r.Output, "checked")
	require.NotContains(t, r.Output, "folder fd")
}
