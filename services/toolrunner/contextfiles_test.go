package toolrunner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

const secret = "HOST-SECRET-7f3a"

// askContextFiles asks, as the loop does, for a session's context files.
func askContextFiles(t *testing.T, nc *nats.Conn, pool string, req proto.ContextFilesRequest) (proto.ContextFilesReply, error) {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	msg, err := nc.Request(bus.ContextFiles(pool), data, 5*time.Second)
	if err != nil {
		return proto.ContextFilesReply{}, err
	}
	var reply proto.ContextFilesReply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	return reply, nil
}

func (h *harness) contextFiles(req proto.ContextFilesRequest) proto.ContextFilesReply {
	h.t.Helper()
	reply, err := askContextFiles(h.t, h.bus.NC, bus.DefaultPool, req)
	require.NoError(h.t, err)
	return reply
}

func writeAt(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func skippedNames(reply proto.ContextFilesReply) map[string]string {
	out := map[string]string{}
	for _, s := range reply.Skipped {
		out[s.Name] = s.Reason
	}
	return out
}

func TestContextFilesAreReadFromTheSessionsWorkspace(t *testing.T) {
	h := newHarness(t)
	writeAt(t, filepath.Join(h.cfg.WorkspaceRoot, "proj", "AGENTS.md"), "Run tests with `make check`.")
	writeAt(t, filepath.Join(h.cfg.WorkspaceRoot, "proj", "CLAUDE.md"), "Be brief.")
	writeAt(t, filepath.Join(h.cfg.WorkspaceRoot, "tenants", "acme", "proj", "HERALD.md"), "acme rules")

	reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "s1", Workspace: "proj"})
	require.Empty(t, reply.Error)
	require.Empty(t, reply.Skipped)
	require.Equal(t, []proto.ContextFile{{Name: "AGENTS.md", Text: "Run tests with `make check`."}, {Name: "CLAUDE.md", Text: "Be brief."}}, reply.Files)

	reply = h.contextFiles(proto.ContextFilesRequest{SessionID: "s2", Tenant: "acme", Workspace: bus.TenantWorkspace("acme", "proj")})
	require.Equal(t, []proto.ContextFile{{Name: "HERALD.md", Text: "acme rules"}}, reply.Files)

	// A workspace that does not exist yet has no context files: no error.
	reply = h.contextFiles(proto.ContextFilesRequest{SessionID: "s3", Workspace: "new/one"})
	require.Equal(t, proto.ContextFilesReply{}, reply)
	require.NoDirExists(t, filepath.Join(h.cfg.WorkspaceRoot, "new"), "reading context files creates nothing")
}

// Hermes' TestTruncateContent (HERMES-TESTS.md §12), now where the file is
// read: a context file at the limit is kept whole; a longer one keeps its
// head (70%) and tail (20%) around a note naming the file and what was kept.
func TestParityContextFileTruncation(t *testing.T) {
	h := newHarness(t)
	const limit = proto.MaxContextFileBytes
	exact := strings.Repeat("a", limit)
	long := "HEAD" + strings.Repeat("m", 3*limit) + "TAIL"
	writeAt(t, filepath.Join(h.cfg.WorkspaceRoot, "AGENTS.md"), exact)
	writeAt(t, filepath.Join(h.cfg.WorkspaceRoot, "CLAUDE.md"), long)

	reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "s1"})
	require.Len(t, reply.Files, 2)
	require.Equal(t, exact, reply.Files[0].Text)
	got := reply.Files[1].Text
	require.True(t, strings.HasPrefix(got, "HEAD"))
	require.True(t, strings.HasSuffix(got, "TAIL"), "the end of the file is kept")
	require.Contains(t, got, fmt.Sprintf("CLAUDE.md truncated: kept the first %d and last %d of its %d characters",
		limit*7/10, limit*2/10, len(long)))
	require.Less(t, len(got), limit+200)
}

// A context file of 64 GiB (sparse) is answered at once with its head and
// tail: no more than the cap is read from disk.
func TestHugeContextFileIsReadOnlyUpToTheCap(t *testing.T) {
	h := newHarness(t)
	path := filepath.Join(h.cfg.WorkspaceRoot, "AGENTS.md")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = f.WriteString("HEAD")
	require.NoError(t, err)
	require.NoError(t, f.Truncate(64<<30))
	require.NoError(t, f.Close())

	reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "s1"})
	require.Len(t, reply.Files, 1)
	require.True(t, strings.HasPrefix(reply.Files[0].Text, "HEAD"))
	require.Contains(t, reply.Files[0].Text, fmt.Sprintf("of its %d characters", int64(64<<30)))
	require.Less(t, len(reply.Files[0].Text), proto.MaxContextFileBytes+200)
}

// The attacks of issue 26 cause 1: a model with a terminal plants context
// files that lead out of the workspace, hoping the next session reads them
// into its system prompt. Each is skipped and named; none is read; a FIFO
// does not hang the runner.
func TestContextFilesThatLeadOutOfTheWorkspaceAreSkipped(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(t.TempDir(), "shadow")
	writeAt(t, outside, secret)
	ws := filepath.Join(h.cfg.WorkspaceRoot, "proj")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.Symlink("/proc/self/environ", filepath.Join(ws, "AGENTS.md")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "HERALD.md")))
	require.NoError(t, os.Symlink("../../../../../../../../.."+outside, filepath.Join(ws, ".cursorrules")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, "CLAUDE.md"), 0o644))

	reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "s1", Workspace: "proj"})
	require.Empty(t, reply.Files)
	skipped := skippedNames(reply)
	require.Len(t, skipped, 4, "%+v", reply)
	require.Contains(t, skipped["AGENTS.md"], "could not be opened inside the workspace")
	require.Contains(t, skipped["HERALD.md"], "could not be opened inside the workspace")
	require.Contains(t, skipped[".cursorrules"], "could not be opened inside the workspace")
	require.Contains(t, skipped["CLAUDE.md"], "not a regular file")

	// Pointing at a device or /proc from inside fares no better, nor a hard
	// link to a file outside the workspace (same file system).
	ws2 := filepath.Join(h.cfg.WorkspaceRoot, "proj2")
	require.NoError(t, os.MkdirAll(ws2, 0o755))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(ws2, "AGENTS.md")))
	require.NoError(t, os.Symlink("/proc/1/environ", filepath.Join(ws2, "HERALD.md")))
	linked := filepath.Join(h.cfg.WorkspaceRoot, "..", filepath.Base(h.cfg.WorkspaceRoot)+"-secret")
	writeAt(t, linked, secret)
	t.Cleanup(func() { _ = os.Remove(linked) })
	require.NoError(t, os.Link(linked, filepath.Join(ws2, "CLAUDE.md")))
	reply = h.contextFiles(proto.ContextFilesRequest{SessionID: "s2", Workspace: "proj2"})
	require.Empty(t, reply.Files)
	skipped = skippedNames(reply)
	require.Len(t, skipped, 3, "%+v", reply)
	require.Contains(t, skipped["CLAUDE.md"], "hard links")
	data, _ := json.Marshal(reply)
	require.NotContains(t, string(data), secret)
}

// A tenant's context files come from its own folder only: neither a context
// file nor the workspace folder itself may be a symlink into another
// tenant's folder, and an unbound session never reads tenants/.
func TestContextFilesStayInsideTheTenantsFolder(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	writeAt(t, filepath.Join(root, "tenants", "acme", "proj", "AGENTS.md"), "acme: "+secret)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "tenants", "globex", "proj"), 0o755))
	require.NoError(t, os.Symlink("../../acme/proj/AGENTS.md", filepath.Join(root, "tenants", "globex", "proj", "AGENTS.md")))
	require.NoError(t, os.Symlink("../acme/proj", filepath.Join(root, "tenants", "globex", "stolen")))

	reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "g1", Tenant: "globex", Workspace: bus.TenantWorkspace("globex", "proj")})
	require.Empty(t, reply.Files)
	require.Contains(t, skippedNames(reply)["AGENTS.md"], "could not be opened inside the workspace")

	for _, req := range []proto.ContextFilesRequest{
		{SessionID: "g2", Tenant: "globex", Workspace: bus.TenantWorkspace("globex", "stolen")},
		{SessionID: "g3", Tenant: "globex", Workspace: bus.TenantWorkspace("acme", "proj")},
		{SessionID: "u1", Workspace: bus.TenantWorkspace("acme", "proj")},
		{SessionID: "u2", Workspace: "../" + filepath.Base(root)},
	} {
		reply := h.contextFiles(req)
		require.Empty(t, reply.Files, "%+v", req)
		require.Contains(t, reply.Error, "outside the workspace", "%+v", req)
	}
}

// A model racing symlink swaps on a context file while sessions start: the
// secret outside is never read, however the race falls.
func TestContextFileSymlinkSwapRaceNeverLeaks(t *testing.T) {
	h := newHarness(t)
	outside := filepath.Join(t.TempDir(), "secret")
	writeAt(t, outside, secret)
	ws := filepath.Join(h.cfg.WorkspaceRoot, "race")
	writeAt(t, filepath.Join(ws, "safe"), "safe rules")
	name := filepath.Join(ws, "AGENTS.md")
	require.NoError(t, os.Symlink("safe", name))

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			tmp := filepath.Join(ws, fmt.Sprintf(".swap%d", i%2))
			target := "safe"
			if i%2 == 0 {
				target = outside
			}
			_ = os.Remove(tmp)
			if os.Symlink(target, tmp) == nil {
				_ = os.Rename(tmp, name)
			}
		}
	}()
	safe := 0
	for range 300 {
		reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "r", Workspace: "race"})
		data, _ := json.Marshal(reply)
		require.NotContains(t, string(data), secret)
		if len(reply.Files) == 1 && reply.Files[0].Text == "safe rules" {
			safe++
		}
	}
	stop.Store(true)
	wg.Wait()
	require.NotZero(t, safe, "the symlink inside the workspace was followed while it pointed inside")
}

// A pooled session's context files come from a runner of its pool, the one
// whose workspace it uses; a runner of another pool does not answer.
func TestContextFilesAreAnsweredByARunnerOfTheSessionsPool(t *testing.T) {
	h := newHarness(t)
	gpuCfg := h.cfg
	gpuCfg.Pool = "gpu"
	gpuCfg.WorkspaceRoot = t.TempDir()
	h.startRunner("gpu-runner", gpuCfg)
	writeAt(t, filepath.Join(gpuCfg.WorkspaceRoot, "AGENTS.md"), "gpu rules")
	writeAt(t, filepath.Join(h.cfg.WorkspaceRoot, "AGENTS.md"), "default rules")

	reply, err := askContextFiles(t, h.bus.NC, "gpu", proto.ContextFilesRequest{SessionID: "p1"})
	require.NoError(t, err)
	require.Equal(t, []proto.ContextFile{{Name: "AGENTS.md", Text: "gpu rules"}}, reply.Files)
	reply, err = askContextFiles(t, h.bus.NC, bus.DefaultPool, proto.ContextFilesRequest{SessionID: "p2"})
	require.NoError(t, err)
	require.Equal(t, []proto.ContextFile{{Name: "AGENTS.md", Text: "default rules"}}, reply.Files)
	_, err = askContextFiles(t, h.bus.NC, "nobody", proto.ContextFilesRequest{SessionID: "p3"})
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// The workspace folder itself swapped, in a tight loop, between a real
// folder and a symlink into a tenant's folder: an unbound session's context
// files never come from the tenant, however the race falls.
func TestWorkspaceFolderSwapRaceNeverReachesATenant(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	writeAt(t, filepath.Join(root, "tenants", "acme", "AGENTS.md"), "acme: "+secret)
	writeAt(t, filepath.Join(root, "real", "AGENTS.md"), "own rules")
	name := filepath.Join(root, "proj")
	require.NoError(t, os.Symlink("real", name))

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			tmp := filepath.Join(root, fmt.Sprintf(".swap%d", i%2))
			target := "real"
			if i%2 == 0 {
				target = "tenants/acme"
			}
			_ = os.Remove(tmp)
			if os.Symlink(target, tmp) == nil {
				_ = os.Rename(tmp, name)
			}
		}
	}()
	refused := 0
	for range 300 {
		reply := h.contextFiles(proto.ContextFilesRequest{SessionID: "r", Workspace: "proj"})
		data, _ := json.Marshal(reply)
		require.NotContains(t, string(data), secret)
		if strings.Contains(reply.Error, "outside the workspace") {
			refused++
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Equal(t, 300, refused, "a workspace folder that is a symlink is refused every time")
}
