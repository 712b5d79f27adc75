package toolrunner

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/stretchr/testify/require"
)

// These tests attack who a sandboxed command is on the host. CI runs them
// as root (a root runner), and TestSandboxRunsTheSameAsANonRootRunner runs
// them again as nobody (a runner started as a user).

// ownerOf is the host uid owning p (not following a last symlink).
func ownerOf(t *testing.T, p string) int {
	t.Helper()
	info, err := os.Lstat(p)
	require.NoError(t, err)
	return int(info.Sys().(*syscall.Stat_t).Uid)
}

func TestSandboxCommandIsNotRootOnTheHost(t *testing.T) {
	// A folder the operator shares read-only, holding a file only its
	// owner may read (root's, for a root runner, as /etc/ssl/private holds
	// keys), and /etc/shadow shared by mistake: visible, never readable.
	shared := t.TempDir()
	secret := fmt.Sprintf("owner-only-%d", time.Now().UnixNano())
	require.NoError(t, os.WriteFile(filepath.Join(shared, "key.pem"), []byte(secret), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "readme"), []byte("for everyone"), 0o644))
	require.NoError(t, os.Chmod(shared, 0o755))
	h := newHarness(t, func(c *Config) { c.Sandbox.ReadOnly = []string{shared, "/etc/shadow"} })

	r := h.inWorkspace("cat " + shared + "/readme; echo; cat " + shared + "/key.pem; echo; test -e /etc/shadow && echo SHADOW-THERE; cat /etc/shadow; echo made > mine.txt")
	require.Contains(t, r.Output, "for everyone", "the read_only folder is there")
	require.Contains(t, r.Output, "SHADOW-THERE", "a read_only file is there")
	require.Contains(t, r.Output, "cat: /etc/shadow: Permission denied", "the command read /etc/shadow")
	if os.Geteuid() == 0 {
		require.NotContains(t, r.Output, secret, "the command read a root-only file")
		require.Contains(t, r.Output, "key.pem: Permission denied")
	}
	// What it creates in its workspace belongs, on the host, to the user it
	// runs as: sandbox.uid (nobody) for a root runner, never root. (Inside,
	// /proc/self/uid_map names bwrap's own namespace, not the host.)
	made := filepath.Join(h.cfg.WorkspaceRoot, "mine", "mine.txt")
	require.Equal(t, "made\n", string(must(os.ReadFile(made))))
	require.NotZero(t, ownerOf(t, made), "the command's file is root's on the host")
	if os.Geteuid() == 0 {
		uid, _ := config.DefaultSandbox().HostIDs()
		require.Equal(t, uid, ownerOf(t, made), "a root runner's command is sandbox.uid (nobody by default)")
	} else {
		require.Equal(t, os.Geteuid(), ownerOf(t, made), "a user's runner's command is that user")
	}

	// Root's powers are gone: no giving files away, no raising limits.
	r = h.inWorkspace("chown 0:0 mine.txt && echo CHOWNED; ulimit -H -n unlimited && echo RAISED; echo done")
	require.NotContains(t, r.Output, "CHOWNED")
	require.NotContains(t, r.Output, "RAISED")
	require.Contains(t, r.Output, "done")
}

func TestSandboxShowsOnlyAnAllowListOfEtc(t *testing.T) {
	h := newHarness(t)
	// Nothing private of /etc is there, whatever the host holds.
	r := h.inWorkspace("for p in /etc/shadow /etc/gshadow /etc/ssl/private /etc/sudoers /etc/ssh /etc/machine-id /etc/hostname /etc/herald; do test -e $p && echo SEEN $p; done; ls /etc | sort")
	require.NotContains(t, r.Output, "SEEN", r.Output)
	allowed := map[string]bool{}
	for _, f := range etcFiles {
		allowed[strings.SplitN(f, "/", 2)[0]] = true
	}
	for _, name := range strings.Fields(r.Output) {
		require.True(t, allowed[name], "/etc/%s is visible but not on the allow-list", name)
	}
	if _, err := os.Stat("/etc/ssl/certs"); err == nil {
		r = h.inWorkspace("ls /etc/ssl")
		require.Equal(t, []string{"certs", "openssl.cnf"}[:len(strings.Fields(r.Output))], strings.Fields(r.Output), "of /etc/ssl only the CA certificates (and openssl.cnf)")
	}
	// What the allow-list is for still works: the shell, coreutils, Python,
	// git and Node, name lookups of the user.
	r = h.inWorkspace(`set -e; id -un >/dev/null; ls / >/dev/null; date >/dev/null; ` +
		`python3 -c 'import ssl, json, pathlib; ssl.create_default_context(); print("py", json.dumps(1))'; ` +
		`git init -q repo && cd repo && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && echo git-ok; ` +
		`if command -v node >/dev/null; then node -e 'console.log("node-ok")'; else echo node-ok; fi`)
	require.Equal(t, "py 1\ngit-ok\nnode-ok\n", r.Output, "exit %d", r.ExitCode)
}

func TestSandboxCommandChangesWhatTheRunnerWrote(t *testing.T) {
	// A root runner writes files as root; its commands (sandbox.uid) must
	// still be able to change their workspace: append, create in folders
	// the runner made, delete.
	h := newHarness(t)
	for _, p := range []string{"notes.txt", "src/pkg/main.py"} {
		req := h.request("write_file", map[string]any{"path": p, "content": "first\n"})
		req.Workspace = "mine"
		require.Equal(t, "ok", h.run(req).GetStatus())
	}
	r := h.inWorkspace("set -e; echo second >> notes.txt; touch src/pkg/__init__.py; mkdir src/pkg/sub; rm src/pkg/main.py; cat notes.txt")
	require.Equal(t, "first\nsecond\n", r.Output, "exit %d", r.ExitCode)
	// And the runner reads and writes what the command made.
	req := h.request("read_file", map[string]any{"path": "notes.txt"})
	req.Workspace = "mine"
	require.Contains(t, h.run(req).GetContent(), "second")
}

func TestSandboxHandOverNeverLeavesTheWorkspace(t *testing.T) {
	// A root runner gives the sandbox user what root owns in the workspace.
	// Root-owned symlinks in it (a checkpoint restored as root copies them)
	// and a folder swapped for a symlink while it walks must not make it
	// hand over a host file.
	h := newHarness(t)
	host := t.TempDir()
	hostFile := filepath.Join(host, "host-secret")
	require.NoError(t, os.WriteFile(hostFile, []byte("x"), 0o600))
	ws := filepath.Join(h.cfg.WorkspaceRoot, "mine")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.Symlink(hostFile, filepath.Join(ws, "to-file")))
	require.NoError(t, os.Symlink(host, filepath.Join(ws, "to-dir")))
	require.NoError(t, os.Symlink("../../../../../../../../.."+host, filepath.Join(ws, "climb")))
	hostOwner := ownerOf(t, hostFile)

	r := h.inWorkspace("ls to-dir/ climb/ 2>&1; cat to-file 2>&1; echo ran")
	require.Contains(t, r.Output, "ran")
	require.NotContains(t, r.Output, "host-secret", "a symlink took the command out of its workspace")
	require.Equal(t, hostOwner, ownerOf(t, hostFile), "the hand-over followed a symlink out of the workspace")
	require.Equal(t, hostOwner, ownerOf(t, host))

	// The race: a folder full of root's files swapped for a symlink to the
	// host folder, as fast as possible, while the hand-over walks.
	swap := filepath.Join(ws, "swap")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			_ = os.RemoveAll(swap)
			if i%2 == 0 {
				_ = os.MkdirAll(filepath.Join(swap, "inner"), 0o755)
				_ = os.WriteFile(filepath.Join(swap, "inner", "f"), nil, 0o644)
			} else {
				_ = os.Symlink(host, swap)
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	walks := 0
	for time.Now().Before(deadline) {
		h.svc.sandbox.handOver(ws)
		walks++
	}
	stop.Store(true)
	wg.Wait()
	require.Greater(t, walks, 50)
	require.Equal(t, hostOwner, ownerOf(t, hostFile), "a racing swap made the hand-over change a host file")
	require.Equal(t, hostOwner, ownerOf(t, host))
}

// nonRootTests are the sandbox tests run again by a runner that is not root.
const nonRootTests = "^(TestSandboxCannotReadFilesOutsideTheWorkspace|TestSandboxCannotWriteOutsideTheWorkspace|" +
	"TestSandboxCommandIsNotRootOnTheHost|TestSandboxShowsOnlyAnAllowListOfEtc|TestSandboxSeesNoHostProcess|" +
	"TestSandboxEndsEveryProcessWithTheCall|TestSandboxHasNoNetworkUnlessAllowed|TestExecuteCodeRunsInsideANoNetworkSandbox|" +
	"TestSandboxMountsTheHeldWorkspaceUnderSymlinkSwapRaces|TestSandboxCommandHoldsNoFolderOfTheHost)$"

func TestSandboxRunsTheSameAsANonRootRunner(t *testing.T) {
	if os.Getenv("HERALD_TEST_NONROOT_CHILD") != "" {
		t.Log("already the non-root run")
		return
	}
	// This test binary again, as nobody (or, run by a user, as that user).
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "toolrunner.test")
	self, err := os.Open(os.Args[0])
	require.NoError(t, err)
	defer self.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, self)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o755))

	argv := []string{bin, "-test.run", nonRootTests, "-test.count=1", "-test.v"}
	uid := os.Geteuid()
	if uid == 0 {
		uid, _ = config.DefaultSandbox().HostIDs()
		require.NoError(t, os.Chown(tmp, uid, uid))
		argv = append([]string{"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid), "--clear-groups", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "HERALD_TEST_NONROOT_CHILD=1")
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "the sandbox tests fail for a runner that is uid %d:\n%s", uid, got)
	for _, name := range strings.Split(strings.Trim(nonRootTests, "^()$"), "|") {
		require.Contains(t, string(got), "--- PASS: "+name+" ", "%s did not run as uid %d", name, uid)
	}
}

func TestSandboxUIDIsConfigurable(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Sandbox.UID, c.Sandbox.GID = 4242, 4343 })
	r := h.inWorkspace("echo x > by-whom")
	require.Equal(t, 0, r.ExitCode, r.Output)
	info, err := os.Stat(filepath.Join(h.cfg.WorkspaceRoot, "mine", "by-whom"))
	require.NoError(t, err)
	st := info.Sys().(*syscall.Stat_t)
	if os.Geteuid() == 0 {
		require.Equal(t, [2]uint32{4242, 4343}, [2]uint32{st.Uid, st.Gid}, "sandbox.uid and sandbox.gid are who a root runner's commands are")
	} else {
		require.Equal(t, uint32(os.Geteuid()), st.Uid, "a user's runner runs commands as itself, whatever sandbox.uid says")
	}
	require.ErrorContains(t, config.Sandbox{Mode: "bwrap", CPUSeconds: 1, MemoryMB: 1, Processes: 1, UID: -1}.Validate(), "uid and gid must not be negative")
}

func TestSandboxHandOverFindsWhatTheRunnerWroteInASettledWorkspace(t *testing.T) {
	// Every folder counts as settled: the walk trusts its memory of them,
	// and must still find a file root adds deep down, or renames into place.
	defer func(now func() time.Time) { handOverNow = now }(handOverNow)
	handOverNow = func() time.Time { return time.Now().Add(time.Minute) }
	sb := &Sandbox{cfg: config.DefaultSandbox(), stage: "set", hand: &handOverState{}}
	uid, _ := sb.cfg.HostIDs()
	dir := t.TempDir()
	deep := filepath.Join(dir, "a", "b", "c")
	require.NoError(t, os.MkdirAll(deep, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(deep, "old"), nil, 0o644))
	owner := func(p string) int { return ownerOf(t, p) }
	want := os.Geteuid()
	if want == 0 {
		want = uid
	}
	sb.handOver(dir)
	require.Equal(t, want, owner(filepath.Join(deep, "old")))
	require.Equal(t, want, owner(dir))

	require.NoError(t, os.WriteFile(filepath.Join(deep, "new"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tmp"), nil, 0o644))
	require.NoError(t, os.Rename(filepath.Join(dir, "tmp"), filepath.Join(dir, "a", "renamed")))
	require.NoError(t, os.MkdirAll(filepath.Join(deep, "d", "e"), 0o755))
	sb.handOver(dir)
	for _, p := range []string{filepath.Join(deep, "new"), filepath.Join(dir, "a", "renamed"), filepath.Join(deep, "d", "e")} {
		require.Equal(t, want, owner(p), p)
	}
}
