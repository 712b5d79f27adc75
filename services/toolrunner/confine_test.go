package toolrunner

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const secretText = "TOP-SECRET decoy-a\n"

// victims are what an attacker in tenants/acme/proj is after: a folder of
// the host and another tenant's workspace, each holding secret.txt (with
// the text a patch of the attacker's own file would also match).
type victims struct {
	host, globex string
}

func plantVictims(t *testing.T, root string) victims {
	t.Helper()
	v := victims{host: t.TempDir(), globex: filepath.Join(root, "tenants", "globex")}
	for _, dir := range []string{v.host, v.globex} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(secretText), 0o644))
	}
	return v
}

// untouched fails unless each victim folder holds its secret.txt only,
// unchanged: nothing was written there, nothing replaced or added.
func (v victims) untouched(t *testing.T) {
	t.Helper()
	for _, dir := range []string{v.host, v.globex} {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Equal(t, []string{"secret.txt"}, names, "something was written in %s", dir)
		require.Equal(t, secretText, string(must(os.ReadFile(filepath.Join(dir, "secret.txt")))), "%s/secret.txt was changed", dir)
	}
}

// An execute_code program swaps a folder and a file of its workspace for
// symlinks to a host folder and to another tenant's workspace, atomically
// (renameat2 RENAME_EXCHANGE, so the name always exists) in a tight loop,
// while it makes hundreds of read_file, write_file and patch calls through
// herald_tools: not one of them reads a secret or writes outside.
func TestExecuteCodeRacingSymlinkSwapsGetsNothingOutside(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Code.MaxToolCalls = 20000
		// The racing calls fail often (a patch whose text the swap hid);
		// the breaker would stop the attack, not the confinement.
		c.BreakerThreshold = 1 << 30
		// Whether a program that makes symlinks needs approval is the
		// approval policy's question; this test asks the confinement's.
		c.ApprovalsMode = ApprovalsOff
	})
	v := plantVictims(t, h.cfg.WorkspaceRoot)
	ws := filepath.Join(h.cfg.WorkspaceRoot, "tenants", "acme", "proj")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d", "secret.txt"), []byte("decoy-a\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "f.txt"), []byte("decoy-a\n"), 0o644))

	program := fmt.Sprintf(`
import ctypes, json, os, threading, time
from herald_tools import read_file, write_file, patch, ToolError
HOST = %q
libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2 " + a)
links = {"d.host": HOST, "d.globex": "../../globex",
         "f.host": HOST + "/secret.txt", "f.globex": "../../globex/secret.txt"}
for name, target in links.items():
    os.symlink(target, name)
stop = False
swaps = 0
def swapper():
    global swaps
    while not stop:
        for name, link in (("d", "d.host"), ("d", "d.globex"), ("f.txt", "f.host"), ("f.txt", "f.globex")):
            exchange(name, link)  # name is the symlink now
            exchange(name, link)  # and the real one again
            if not os.path.islink(link):  # a write replaced the link while it was at name
                os.symlink(links[link], link + ".new")
                os.replace(link + ".new", link)
        swaps += 1
calls = {"n": 0, "ok": 0, "refused": 0, "leaks": 0}
def attempt(fn, **kw):
    calls["n"] += 1
    try:
        out = fn(**kw)
        calls["ok"] += 1
    except ToolError as e:
        out = str(e)
        calls["refused"] += 1
    if "TOP-SECRET" in out:
        calls["leaks"] += 1
        print("LEAK", fn.__name__, kw, out[:200])
t = threading.Thread(target=swapper)
t.start()
end = time.time() + 5
try:
    while (time.time() < end or calls["n"] < 600) and calls["n"] < 15000:
        attempt(read_file, path="d/secret.txt")
        attempt(read_file, path="f.txt")
        attempt(write_file, path="d/pwned.txt", content="PWNED")
        attempt(write_file, path="f.txt", content="decoy-a\n")
        attempt(patch, path="d/secret.txt", old_string="decoy-a", new_string="decoy-b")
        attempt(patch, path="d/secret.txt", old_string="decoy-b", new_string="decoy-a")
finally:
    stop = True
    t.join()
calls["swaps"] = swaps
print(json.dumps(calls))
`, v.host)
	req := h.request("execute_code", map[string]any{"code": program})
	req.Workspace = "tenants/acme/proj"
	h.publish(req, req.GetSessionId()+":"+req.GetCallId())
	res := h.result(req, 3*time.Minute)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	out := res.GetContent()
	require.NotContains(t, out, "TOP-SECRET")
	var got struct{ N, OK, Refused, Leaks, Swaps int }
	require.NoError(t, json.Unmarshal([]byte(out[strings.LastIndex(out, "{"):]), &got), out)
	t.Logf("%d calls (%d ok, %d refused) during %d rounds of swaps", got.N, got.OK, got.Refused, got.Swaps)
	require.GreaterOrEqual(t, got.N, 600, "hundreds of calls raced the swaps")
	require.Positive(t, got.OK, "some calls found the real folder and worked")
	require.Positive(t, got.Refused, "some calls met a symlink and were refused")
	require.Greater(t, got.Swaps, 100)
	require.Zero(t, got.Leaks)
	v.untouched(t)
}

// direct runs a call of tool in the harness's runner as the runner runs
// it, without the bus (as fast as a racing attacker can make them).
func direct(h *harness, workspace, tool string, args any) outcome {
	spec, found := toolspec.Lookup(tool)
	if !found {
		panic(tool)
	}
	data, _ := json.Marshal(args)
	req := &heraldpb.ToolCallRequest{CallId: "c", SessionId: h.sid, Tenant: "acme", Step: 1,
		Tool: tool, Arguments: string(data), Workspace: workspace}
	return runDirect(h.svc, req, spec)
}

// swapLoop exchanges each pair (a name and a symlink beside it) twice in a
// tight loop until stop is closed; it returns the rounds made. With a calm,
// it rests after each burst of the calm's rounds (see calm).
func swapLoop(t *testing.T, stop <-chan struct{}, pairs [][2]string, c *calm) func() int {
	var rounds atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, p := range pairs {
				for range 2 {
					if err := unix.Renameat2(unix.AT_FDCWD, p[0], unix.AT_FDCWD, p[1], unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("exchange %s: %v", p[0], err)
						return
					}
				}
			}
			if n := rounds.Add(1); c != nil && n%int64(c.burst) == 0 && !c.rest(stop) {
				return
			}
		}
	}()
	return func() int { wg.Wait(); return int(rounds.Load()) }
}

// calm paces a swap loop for a race whose window is wide, such as a
// sandbox's set-up, where a tight loop may leave no call a moment to run on
// a loaded machine. After a burst of rounds in which no call ran, the loop
// rests, with every name in place, until a call that began during the rest
// has ended: that call met no swap. So the race shows calls that ran as well
// as calls refused whatever the machine's timing, the calls that straddle a
// burst's edges still race it, and on a machine where calls run between
// swaps anyway the loop never rests.
type calm struct {
	burst int
	ran   atomic.Bool  // a call ran since the loop last looked
	gen   atomic.Int64 // odd while the loop rests
	ended chan int64   // the rest a call began in, when it ends
}

func newCalm(burst int) *calm { return &calm{burst: burst, ended: make(chan int64, 16)} }

// begin is called as a call starts; end, with its value and whether the
// call ran, as it ends.
func (c *calm) begin() int64 { return c.gen.Load() }

func (c *calm) end(g int64, ran bool) {
	if ran {
		c.ran.Store(true)
	}
	if g%2 == 1 {
		select {
		case c.ended <- g:
		default: // full of older rests' ends: a later call of this rest will say so
		}
	}
}

// rest holds the loop, unless a call ran since it last looked, until a call
// that began after it has ended; false if stop closed first.
func (c *calm) rest(stop <-chan struct{}) bool {
	if c.ran.Swap(false) {
		return true
	}
	g := c.gen.Add(1)
	defer c.gen.Add(1)
	for {
		select {
		case <-stop:
			return false
		case e := <-c.ended:
			if e == g {
				return true
			}
		}
	}
}

// From a goroutine, a folder and a file of the workspace are swapped for
// symlinks out of it, to the host and to another tenant, while every file
// tool and the checkpoint are called thousands of times: nothing outside is
// read, written or copied.
func TestFileToolsHoldAgainstSymlinkSwapRaces(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Checkpoints = true })
	v := plantVictims(t, h.cfg.WorkspaceRoot)
	ws := filepath.Join(h.cfg.WorkspaceRoot, "tenants", "acme", "proj")
	d, f := filepath.Join(ws, "d"), filepath.Join(ws, "f.txt")
	require.NoError(t, os.MkdirAll(d, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "secret.txt"), []byte("decoy-a\n"), 0o644))
	require.NoError(t, os.WriteFile(f, []byte("decoy-a\n"), 0o644))
	require.NoError(t, os.Symlink(v.host, d+".host"))
	require.NoError(t, os.Symlink("../../globex", d+".globex"))
	require.NoError(t, os.Symlink(filepath.Join(v.host, "secret.txt"), f+".host"))
	require.NoError(t, os.Symlink("../../globex/secret.txt", f+".globex"))
	// f.txt is only read here: a write would replace the symlink at its name.
	stop := make(chan struct{})
	rounds := swapLoop(t, stop, [][2]string{{d, d + ".host"}, {d, d + ".globex"}, {f, f + ".host"}, {f, f + ".globex"}}, nil)

	calls := []struct {
		tool string
		args any
	}{
		{"read_file", map[string]any{"path": "d/secret.txt"}},
		{"read_file", map[string]any{"path": "f.txt"}},
		{"write_file", map[string]any{"path": "d/pwned.txt", "content": "PWNED"}},
		{"patch", map[string]any{"path": "d/secret.txt", "old_string": "decoy-a", "new_string": "decoy-b"}},
		{"patch", map[string]any{"path": "d/secret.txt", "old_string": "decoy-b", "new_string": "decoy-a"}},
		{"search_files", map[string]any{"pattern": "SECRET|decoy"}},
		{"search_files", map[string]any{"pattern": "SECRET|decoy", "path": "d"}},
		{"search_files", map[string]any{"pattern": "*", "file_glob": "*.txt", "path": "d"}},
	}
	var n, worked, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end) || n.Load() < 2000; {
				for _, c := range calls {
					o := direct(h, "tenants/acme/proj", c.tool, c.args)
					n.Add(1)
					if o.isError() {
						refused.Add(1)
					} else {
						worked.Add(1)
					}
					if strings.Contains(o.content, "TOP-SECRET") {
						t.Errorf("%s %v read a secret: %s", c.tool, c.args, o.content)
						return
					}
				}
				if g == 0 {
					// A checkpoint per round: snapshot copies the workspace.
					req := &heraldpb.ToolCallRequest{SessionId: h.sid, Tenant: "acme", Step: int32(n.Load()), Workspace: "tenants/acme/proj"}
					c, o := h.svc.newCall(req, toolspec.Spec{Name: "write_file"}, nil, 1)
					if c == nil {
						t.Errorf("workspace: %s", o.content)
						return
					}
					h.svc.checkpoint(c)
					c.ws.close()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	t.Logf("%d calls (%d worked, %d refused) during %d rounds of swaps", n.Load(), worked.Load(), refused.Load(), rounds())
	require.Positive(t, worked.Load())
	require.Positive(t, refused.Load())
	v.untouched(t)
	// No checkpoint holds a copy of a secret (symlinks are kept as links).
	cps, err := ListCheckpoints(h.cfg, h.sid)
	require.NoError(t, err)
	require.NotEmpty(t, cps)
	require.NoError(t, filepath.WalkDir(h.cfg.CheckpointDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			require.NotContains(t, string(must(os.ReadFile(p))), "TOP-SECRET", p)
		}
		return err
	}))
}

// A tenant's workspace is inside its tenant's folder only: a symlink from
// there to another tenant's folder (or the tenant's folder itself being
// one) is refused, whatever the call.
func TestTenantWorkspaceSymlinkToAnotherTenantIsRefused(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	v := plantVictims(t, root)
	acme := filepath.Join(root, "tenants", "acme")
	require.NoError(t, os.MkdirAll(acme, 0o755))
	require.NoError(t, os.Symlink("../globex", filepath.Join(acme, "x")))
	require.NoError(t, os.Symlink(v.globex, filepath.Join(acme, "abs")))
	require.NoError(t, os.Symlink(v.host, filepath.Join(acme, "host")))
	require.NoError(t, os.Symlink("globex", filepath.Join(root, "tenants", "initech")))

	for _, c := range []struct{ tenant, workspace string }{
		{"acme", "tenants/acme/x"}, {"acme", "tenants/acme/abs"}, {"acme", "tenants/acme/host"},
		{"acme", "tenants/acme/x/sub"}, {"initech", "tenants/initech"}, {"initech", "tenants/initech/p"},
	} {
		t.Run(c.workspace, func(t *testing.T) {
			for _, call := range []struct {
				tool string
				args map[string]any
			}{
				{"read_file", map[string]any{"path": "secret.txt"}},
				{"write_file", map[string]any{"path": "new.txt", "content": "x"}},
				{"patch", map[string]any{"path": "secret.txt", "old_string": "decoy-a", "new_string": "pwned"}},
				{"search_files", map[string]any{"pattern": "SECRET"}},
				{"terminal", map[string]any{"command": "cat secret.txt; echo pwned > new.txt"}},
			} {
				req := h.request(call.tool, call.args)
				req.Tenant, req.Workspace = c.tenant, c.workspace
				res := h.run(req)
				require.Equal(t, "denied", res.GetStatus(), "%s: %s", call.tool, res.GetContent())
				require.Contains(t, res.GetContent(), "outside the workspace")
				require.NotContains(t, res.GetContent(), "TOP-SECRET")
			}
		})
	}
	// Nor is another tenant's folder named outright.
	req := h.request("read_file", map[string]any{"path": "secret.txt"})
	req.Tenant, req.Workspace = "acme", "tenants/globex"
	res := h.run(req)
	require.Equal(t, "denied", res.GetStatus(), res.GetContent())
	require.NotContains(t, res.GetContent(), "TOP-SECRET")
	v.untouched(t)

	// Inside its own folder, a tenant's workspace symlinks stay fine as
	// links to follow within the workspace.
	require.NoError(t, os.MkdirAll(filepath.Join(acme, "proj", "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(acme, "proj", "docs", "guide.md"), []byte("the guide"), 0o644))
	require.NoError(t, os.Symlink("docs/guide.md", filepath.Join(acme, "proj", "README.md")))
	req = h.request("read_file", map[string]any{"path": "README.md"})
	req.Workspace = "tenants/acme/proj"
	require.Contains(t, h.run(req).GetContent(), "the guide")
}

// An untenanted task never reaches the tenants' folder: not through a
// symlink at the root as its workspace, nor as a path of its tools, nor
// into the runner's data folder the same way.
func TestUntenantedTaskDoesNotReachTenantsThroughSymlinks(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, ".herald")
	h := newHarness(t, func(c *Config) { c.WorkspaceRoot, c.DataDir = root, data })
	plans := filepath.Join(root, "tenants", "acme", "plans.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(plans), 0o755))
	require.NoError(t, os.WriteFile(plans, []byte("acme-only"), 0o644))
	require.NoError(t, os.MkdirAll(data, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(data, "store"), []byte("every-transcript"), 0o644))
	for name, target := range map[string]string{"t": "tenants", "a": "tenants/acme", "abs": filepath.Join(root, "tenants", "acme"), "h": ".herald", "nested/deeper": "../tenants/acme"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(root, name)))
	}

	// As its workspace.
	for _, ws := range []string{"t", "t/acme", "a", "abs", "h", "nested/deeper"} {
		req := h.request("read_file", map[string]any{"path": "plans.txt"})
		req.Tenant, req.Workspace = "", ws
		res := h.run(req)
		require.Equal(t, "denied", res.GetStatus(), "workspace %s: %s", ws, res.GetContent())
		require.NotContains(t, res.GetContent(), "acme-only")
	}
	// As paths of its tools at the root.
	for _, p := range []string{"t/acme/plans.txt", "a/plans.txt", "abs/plans.txt", "nested/deeper/plans.txt", "h/store", "tenants/acme/plans.txt"} {
		res := h.call("read_file", map[string]any{"path": p})
		require.Equal(t, "denied", res.GetStatus(), "%s: %s", p, res.GetContent())
		require.NotContains(t, res.GetContent(), "acme-only")
		require.NotContains(t, res.GetContent(), "every-transcript")
		res = h.call("write_file", map[string]any{"path": filepath.Join(filepath.Dir(p), "new.txt"), "content": "x"})
		require.Equal(t, "denied", res.GetStatus(), "%s: %s", p, res.GetContent())
		res = h.call("search_files", map[string]any{"pattern": "only|transcript", "path": filepath.Dir(p)})
		require.NotContains(t, res.GetContent(), "acme-only")
		require.NotContains(t, res.GetContent(), "every-transcript")
	}
	require.NoFileExists(t, filepath.Join(root, "tenants", "acme", "new.txt"))
	require.NoFileExists(t, filepath.Join(data, "new.txt"))
	require.Equal(t, "acme-only", string(must(os.ReadFile(plans))))
}

// write_file and patch stop at the per-call limit and at the workspace's
// cap, with an error naming the setting, and write nothing.
func TestFileSizeLimits(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Files = FileLimits{MaxWriteBytes: 1000, MaxWorkspaceBytes: 2500} })
	root := h.cfg.WorkspaceRoot

	res := h.call("write_file", map[string]any{"path": "new/dir/big.txt", "content": strings.Repeat("x", 1001)})
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "over 1000 bytes")
	require.Contains(t, res.GetContent(), "files.max_write_bytes")
	require.NoDirExists(t, filepath.Join(root, "new"), "nothing was made")

	require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "a.txt", "content": strings.Repeat("a", 1000)}).GetStatus())
	res = h.call("patch", map[string]any{"path": "a.txt", "old_string": "a", "new_string": "bb", "replace_all": true})
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "files.max_write_bytes")
	require.Equal(t, strings.Repeat("a", 1000), string(must(os.ReadFile(filepath.Join(root, "a.txt")))))

	require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "b.txt", "content": strings.Repeat("b", 1000)}).GetStatus())
	res = h.call("write_file", map[string]any{"path": "c.txt", "content": strings.Repeat("c", 600)})
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "the workspace would hold 2600 bytes")
	require.Contains(t, res.GetContent(), "files.max_workspace_bytes")
	require.NoFileExists(t, filepath.Join(root, "c.txt"))
	res = h.call("write_file", map[string]any{"path": "more/c.txt", "content": strings.Repeat("c", 600)})
	require.Contains(t, res.GetContent(), "files.max_workspace_bytes")
	require.NoDirExists(t, filepath.Join(root, "more"), "nothing was made")
	// Replacing a file counts what it frees.
	require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "b.txt", "content": strings.Repeat("b", 900)}).GetStatus())
	require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "c.txt", "content": strings.Repeat("c", 500)}).GetStatus())
	// A workspace over its cap (a command wrote it) may still be edited
	// down, not up.
	other := filepath.Join(root, "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "log.txt"), []byte(strings.Repeat("l", 5000)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "b.txt"), []byte("keep "+strings.Repeat("b", 995)), 0o644))
	inOther := func(tool string, args map[string]any) *heraldpb.ToolResult {
		req := h.request(tool, args)
		req.Workspace = "other"
		return h.run(req)
	}
	res = inOther("write_file", map[string]any{"path": "b.txt", "content": "keep"})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	res = inOther("patch", map[string]any{"path": "b.txt", "old_string": "keep", "new_string": "keep more"})
	require.Contains(t, res.GetContent(), "files.max_workspace_bytes")
	require.Equal(t, "keep", string(must(os.ReadFile(filepath.Join(other, "b.txt")))))

	// From a program too, and the limit is the tool's error there.
	res = h.code(`
from herald_tools import write_file, ToolError
try:
    write_file(path="d.txt", content="d" * 5000)
except ToolError as e:
    print("refused:", e)
`)
	require.Contains(t, res.GetContent(), "refused: error: write_file refused")
	require.NoFileExists(t, filepath.Join(root, "d.txt"))
}

// With the default limits, a patch that would blow a file up past 64 MiB
// (the 256 MiB landed through one such call) is refused before the
// text is made.
func TestPatchCannotBlowAFileUpPastTheDefaultLimit(t *testing.T) {
	h := newHarness(t)
	require.Equal(t, int64(64<<20), h.cfg.Files.MaxWriteBytes)
	file := filepath.Join(h.cfg.WorkspaceRoot, "seed.txt")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("a", 1<<20)), 0o644))
	res := h.call("patch", map[string]any{"path": "seed.txt", "old_string": "a", "new_string": strings.Repeat("b", 256), "replace_all": true})
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "the file would be 256 MiB, over 64 MiB")
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), info.Size())
}

// No tool opens a workspace path by name: the file tools, search and the
// size measure reach files only through the workspace's opened folder
// (confine.go). Calls by name remain only where the path is the runner's
// own (its configured root and data folder, the checkpoint folders).
func TestWorkspaceFilesAreNeverOpenedByName(t *testing.T) {
	byName := map[string]bool{}
	for _, f := range []string{"Open", "OpenFile", "OpenInRoot", "ReadFile", "WriteFile", "Create", "Stat", "Lstat", "Mkdir", "MkdirAll",
		"Remove", "RemoveAll", "Rename", "Readlink", "Symlink", "Link", "ReadDir", "Chmod", "Chown", "Truncate", "OpenRoot", "DirFS"} {
		byName["os."+f] = true
	}
	for _, f := range []string{"EvalSymlinks", "WalkDir", "Walk", "Glob"} {
		byName["filepath."+f] = true
	}
	// file: the functions allowed to name paths, and what they name.
	allowed := map[string]map[string]bool{
		"files.go": {}, "search.go": {}, "confine.go": {}, "sizes.go": {},
		// the runner's configured root and data folder
		"workspace.go": {"openWorkspace": true},
		// the checkpoint folders, the runner's own
		"checkpoint.go": {"checkpoint": true, "snapshot": true, "copyOut": true, "copyTo": true, "ListCheckpoints": true, "copyIn": true},
	}
	fset := token.NewFileSet()
	for file, funcs := range allowed {
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || funcs[fn.Name.Name] {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && byName[pkg.Name+"."+sel.Sel.Name] {
					t.Errorf("%s: %s calls %s.%s on a path by name; go through the workspace's folder (confine.go)",
						fset.Position(sel.Pos()), fn.Name.Name, pkg.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

func TestFileLimitsComeFromHeraldConfig(t *testing.T) {
	c := config.Default()
	cfg := ConfigFrom(c)
	require.Equal(t, FileLimits{MaxWriteBytes: 64 << 20, MaxWorkspaceBytes: 2 << 30}, cfg.Files, "the defaults")
	c.Files = config.Files{MaxWriteBytes: 1 << 20, MaxWorkspaceBytes: 5 << 30}
	require.Equal(t, FileLimits{MaxWriteBytes: 1 << 20, MaxWorkspaceBytes: 5 << 30}, ConfigFrom(c).Files)
}

// The hidden folders hold under the same race: at the runner's root, an
// untenanted task's folder and file swapped for symlinks into the tenants'
// folder and into the runner's data folder (where the swap's target is
// inside the workspace, so only the hidden-folder check stands between).
func TestHiddenFoldersHoldAgainstSymlinkSwapRaces(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, ".herald")
	h := newHarness(t, func(c *Config) { c.WorkspaceRoot, c.DataDir = root, data })
	plans := filepath.Join(root, "tenants", "acme", "plans.txt")
	store := filepath.Join(data, "store.txt")
	for _, f := range []string{plans, store} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("HIDDEN decoy-a\n"), 0o644))
	}
	d, f := filepath.Join(root, "d"), filepath.Join(root, "f.txt")
	require.NoError(t, os.MkdirAll(d, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d, "plans.txt"), []byte("decoy-a\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, "store.txt"), []byte("decoy-a\n"), 0o644))
	require.NoError(t, os.WriteFile(f, []byte("decoy-a\n"), 0o644))
	require.NoError(t, os.Symlink("tenants/acme", d+".tenant"))
	require.NoError(t, os.Symlink(".herald", d+".data"))
	require.NoError(t, os.Symlink("tenants/acme/plans.txt", f+".tenant"))
	require.NoError(t, os.Symlink(".herald/store.txt", f+".data"))
	stop := make(chan struct{})
	rounds := swapLoop(t, stop, [][2]string{{d, d + ".tenant"}, {d, d + ".data"}, {f, f + ".tenant"}, {f, f + ".data"}}, nil)

	calls := []struct {
		tool string
		args any
	}{
		{"read_file", map[string]any{"path": "d/plans.txt"}},
		{"read_file", map[string]any{"path": "d/store.txt"}},
		{"read_file", map[string]any{"path": "f.txt"}},
		{"write_file", map[string]any{"path": "d/pwned.txt", "content": "PWNED"}},
		{"patch", map[string]any{"path": "d/plans.txt", "old_string": "decoy-a", "new_string": "decoy-b"}},
		{"patch", map[string]any{"path": "d/plans.txt", "old_string": "decoy-b", "new_string": "decoy-a"}},
		{"patch", map[string]any{"path": "d/store.txt", "old_string": "decoy-a", "new_string": "decoy-b"}},
		{"patch", map[string]any{"path": "d/store.txt", "old_string": "decoy-b", "new_string": "decoy-a"}},
		{"search_files", map[string]any{"pattern": "HIDDEN|decoy", "path": "d"}},
	}
	var n, worked atomic.Int64
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) || n.Load() < 2000; {
		for _, c := range calls {
			o := direct(h, "", c.tool, c.args)
			n.Add(1)
			if !o.isError() {
				worked.Add(1)
			}
			require.NotContains(t, o.content, "HIDDEN", "%s %v", c.tool, c.args)
		}
	}
	close(stop)
	t.Logf("%d calls (%d worked) during %d rounds of swaps", n.Load(), worked.Load(), rounds())
	require.Positive(t, worked.Load())
	for _, f := range []string{plans, store} {
		require.Equal(t, "HIDDEN decoy-a\n", string(must(os.ReadFile(f))), f)
		entries, err := os.ReadDir(filepath.Dir(f))
		require.NoError(t, err)
		require.Len(t, entries, 1, "nothing was written beside %s", f)
	}
}

// A checkpoint of the runner's root neither copies nor, on rollback,
// removes what its tools never reach: the tenants' workspaces and the
// runner's data folder; a symlink in it is kept as a link, never followed.
func TestCheckpointOfTheRootLeavesHiddenFoldersAlone(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, ".herald")
	h := newHarness(t, func(c *Config) {
		c.WorkspaceRoot, c.DataDir, c.Checkpoints = root, data, true
		c.CheckpointDir = filepath.Join(data, "checkpoints")
	})
	v := plantVictims(t, root)
	plans := filepath.Join(root, "tenants", "acme", "plans.txt")
	store := filepath.Join(data, "store.txt")
	for _, f := range []string{plans, store} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("kept"), 0o644))
	}
	require.NoError(t, os.Symlink(v.host, filepath.Join(root, "host")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a.txt"), []byte("v1"), 0o644))

	req := h.request("write_file", map[string]any{"path": "a.txt", "content": "v2"})
	req.Tenant = ""
	require.Equal(t, "ok", h.run(req).GetStatus())
	cps, err := ListCheckpoints(h.cfg, h.sid)
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.NoError(t, filepath.WalkDir(filepath.Join(h.cfg.CheckpointDir), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			require.NotContains(t, []string{"kept", secretText}, string(must(os.ReadFile(p))), "%s was copied", p)
		}
		return err
	}))

	_, err = Rollback(h.cfg, h.sid, "", "")
	require.NoError(t, err)
	require.Equal(t, "v1", string(must(os.ReadFile(filepath.Join(root, "a.txt")))))
	require.Equal(t, "kept", string(must(os.ReadFile(plans))), "the tenants' folder survived the rollback")
	require.Equal(t, "kept", string(must(os.ReadFile(store))), "the data folder survived the rollback")
	link, err := os.Readlink(filepath.Join(root, "host"))
	require.NoError(t, err)
	require.Equal(t, v.host, link)
	v.untouched(t)
}

func TestSymlinkLoopsAndFifosEndInAnError(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	require.NoError(t, os.Symlink("b", filepath.Join(root, "a")))
	require.NoError(t, os.Symlink("a", filepath.Join(root, "b")))
	require.NoError(t, unix.Mkfifo(filepath.Join(root, "pipe"), 0o644))
	res := h.call("read_file", map[string]any{"path": "a/x.txt"})
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "too many symlinks")
	res = h.call("read_file", map[string]any{"path": "pipe"})
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "is not a regular file")
	res = h.call("patch", map[string]any{"path": "pipe", "old_string": "a", "new_string": "b"})
	require.Contains(t, res.GetContent(), "is not a regular file")
}
