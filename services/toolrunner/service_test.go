package toolrunner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

func TestWriteThenReadRoundTrip(t *testing.T) {
	h := newHarness(t)
	evs := h.events()
	res := h.call("write_file", map[string]any{"path": "notes/hello.txt", "content": "hello\nworld\n"})
	require.False(t, res.GetIsError(), res.GetContent())
	require.Equal(t, "ok", res.GetStatus())
	require.Equal(t, "runner-1", res.GetRunner())

	res = h.call("read_file", map[string]any{"path": "notes/hello.txt"})
	require.False(t, res.GetIsError(), res.GetContent())
	require.Contains(t, res.GetContent(), "     1|hello\n     2|world\n")

	started := waitEvent(t, evs, proto.EventToolStarted)
	require.Equal(t, "write_file", started.Tool)
	// each call's tool_finished follows its own result, so the read's may
	// come first: the runner works on calls side by side
	finished := waitCallEvent(t, evs, proto.EventToolFinished, started.CallID)
	require.Equal(t, "ok", finished.Status)
	require.Equal(t, "write_file", finished.Tool)
}

func TestReadFileOffsetLimitAndCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReadFileMaxLines = 50 })
	var b strings.Builder
	for i := 1; i <= 120; i++ {
		b.WriteString("line\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "big.txt"), []byte(b.String()), 0o644))

	res := h.call("read_file", map[string]any{"path": "big.txt", "offset": 100, "limit": 5})
	require.Contains(t, res.GetContent(), "   100|line")
	require.Contains(t, res.GetContent(), "   104|line")
	require.NotContains(t, res.GetContent(), "   105|")
	require.Contains(t, res.GetContent(), "offset=105")

	res = h.call("read_file", map[string]any{"path": "big.txt", "limit": 1000})
	require.Contains(t, res.GetContent(), "    50|line")
	require.NotContains(t, res.GetContent(), "    51|")
	require.Contains(t, res.GetContent(), "showing lines 1-50 of 120")

	res = h.call("read_file", map[string]any{"path": "big.txt", "offset": 500})
	require.Contains(t, res.GetContent(), "offset 500 is past the end")
}

func TestReadFileCapsCharactersAndRefusesBinary(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxResultChars = 2000 })
	long := strings.Repeat(strings.Repeat("x", 99)+"\n", 100)
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "wide.txt"), []byte(long), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "blob.bin"), []byte{0x7f, 'E', 'L', 'F', 0, 0, 1}, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(h.cfg.WorkspaceRoot, "dir"), 0o755))

	out := h.call("read_file", map[string]any{"path": "wide.txt"}).GetContent()
	require.Less(t, len(out), 2500)
	require.Regexp(t, `showing lines 1-\d+ of 100; read on with offset=\d+`, out)

	res := h.call("read_file", map[string]any{"path": "blob.bin"})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "binary")
	require.Contains(t, h.call("read_file", map[string]any{"path": "dir"}).GetContent(), "is a directory")
	require.Contains(t, h.call("read_file", map[string]any{"path": "missing.txt"}).GetContent(), "does not exist")
}

func TestPathsOutsideTheWorkspaceAreRefused(t *testing.T) {
	h := newHarness(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(h.cfg.WorkspaceRoot, "link")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(h.cfg.WorkspaceRoot, "secret-link")))

	for _, path := range []string{"../x", "/etc/passwd", "a/../../x", "link/secret.txt", "secret-link", filepath.Join(outside, "secret.txt")} {
		t.Run(path, func(t *testing.T) {
			res := h.call("read_file", map[string]any{"path": path})
			require.True(t, res.GetIsError())
			require.Equal(t, "denied", res.GetStatus())
			require.Contains(t, res.GetContent(), "outside the workspace")
			require.NotContains(t, res.GetContent(), "top secret")
		})
	}
	res := h.call("write_file", map[string]any{"path": "link/new.txt", "content": "x"})
	require.Equal(t, "denied", res.GetStatus())
	require.NoFileExists(t, filepath.Join(outside, "new.txt"))

	// A path that stays inside is fine, however it is spelt.
	res = h.call("write_file", map[string]any{"path": "a/../inside.txt", "content": "ok"})
	require.False(t, res.GetIsError(), res.GetContent())
	require.FileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "inside.txt"))
}

func TestTaskWorkspaceIsASubfolder(t *testing.T) {
	h := newHarness(t)
	req := h.request("write_file", map[string]any{"path": "f.txt", "content": "x"})
	req.Workspace = "proj/a"
	res := h.run(req)
	require.False(t, res.GetIsError(), res.GetContent())
	require.FileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "proj", "a", "f.txt"))
}

func TestBadArgumentsNameTheField(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		tool, args string
		want       []string
	}{
		{"read_file", `{"path": 3}`, []string{`"path" must be a string`, `"path": string (required)`}},
		{"read_file", `{}`, []string{`"path" is required`}},
		{"read_file", `{"path": "a", "offset": "ten"}`, []string{`"offset" must be an integer`}},
		{"write_file", `{"path": "a"}`, []string{`"content" is required`}},
		{"terminal", `{"command": "ls", "timeout": 1.5}`, []string{`"timeout" must be an integer`}},
		{"terminal", `{"cmd": "ls"}`, []string{`"command" is required`}},
		{"read_file", `not json`, []string{"not a JSON object", `"path": string (required)`}},
		{"no_such_tool", `{}`, []string{"unknown tool", "read_file"}},
	}
	for _, tc := range cases {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			res := h.call(tc.tool, tc.args)
			require.True(t, res.GetIsError())
			for _, w := range tc.want {
				require.Contains(t, res.GetContent(), w)
			}
		})
	}
	require.Empty(t, heraldtest.DeadLetters(t, h.bus.JS, bus.StreamToolCalls))
}

func TestRedeliveredCallIsNotRunTwice(t *testing.T) {
	h := newHarness(t)
	req := h.request("terminal", map[string]any{"command": "echo ran >> count.txt"})
	first := h.run(req)
	require.False(t, first.GetIsError(), first.GetContent())

	// The same call again, as JetStream redelivers it after a lost ack.
	h.publish(req, "redelivery-of-"+req.GetCallId())
	h.drained()
	data, err := os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "count.txt"))
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(data))
	require.Equal(t, first.GetDurationMs(), lastResult(t, h.bus.JS, req).GetDurationMs())
}

func TestMalformedCallIsDeadLetteredAndRunnerKeepsWorking(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, h.bus.NC.Publish(bus.ToolCall(bus.DefaultPool, h.sid), []byte("\xff\x00 not protobuf")))
	missing := h.request("read_file", `{"path":"x"}`)
	missing.SessionId = ""
	data, err := gproto.Marshal(missing)
	require.NoError(t, err)
	require.NoError(t, h.bus.NC.Publish(bus.ToolCall(bus.DefaultPool, h.sid), data))

	require.Eventually(t, func() bool {
		return len(heraldtest.DeadLetters(t, h.bus.JS, bus.StreamToolCalls)) == 2
	}, 10*time.Second, 10*time.Millisecond)
	dls := heraldtest.DeadLetters(t, h.bus.JS, bus.StreamToolCalls)
	reasons := dls[0].Header.Get(bus.HeaderError) + " | " + dls[1].Header.Get(bus.HeaderError)
	require.Contains(t, reasons, "malformed *heraldpb.ToolCallRequest")
	require.Contains(t, reasons, "session_id")

	res := h.call("write_file", map[string]any{"path": "after.txt", "content": "still here"})
	require.False(t, res.GetIsError(), res.GetContent())
}

// Call ids repeat across sessions (every session's first call of its first
// step is t1s1c0): each session's execution is its own tool event, while
// the same execution published again is stored once.
func TestToolEventsOfSessionsSharingACallIDAreEachStored(t *testing.T) {
	h := newHarness(t)
	sessions := []string{h.sid, h.sid + "-b", h.sid + "-c"}
	for _, sid := range sessions {
		req := h.request("write_file", map[string]any{"path": sid + ".txt", "content": "abc"})
		req.SessionId, req.CallId = sid, "t1s1c0"
		h.run(req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := h.bus.JS.Stream(ctx, bus.StreamToolEvents)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == uint64(len(sessions))
	}, 5*time.Second, 10*time.Millisecond, "want one tool event per session")
	for _, sid := range sessions {
		m, err := stream.GetMsg(ctx, firstSeqOf(t, stream, sid))
		require.NoError(t, err)
		ev := &heraldpb.ToolEvent{}
		require.NoError(t, bus.Decode(m.Data, ev))
		require.Equal(t, sid+":t1s1c0", ev.GetEventId())
	}
	// A retried publish of one execution's event (same id) is stored once.
	again := &heraldpb.ToolEvent{EventId: h.sid + ":t1s1c0", SessionId: h.sid, CallId: "t1s1c0", Tool: "write_file"}
	require.NoError(t, bus.PublishProto(ctx, h.bus.JS, bus.ToolEventSubject("acme"), again.GetEventId(), again))
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(len(sessions)), info.State.Msgs)
}

// firstSeqOf is the sequence of the stored tool event of session sid.
func firstSeqOf(t *testing.T, stream jetstream.Stream, sid string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		ev := &heraldpb.ToolEvent{}
		require.NoError(t, bus.Decode(m.Data, ev))
		if ev.GetSessionId() == sid {
			return seq
		}
	}
	t.Fatalf("no tool event of session %s", sid)
	return 0
}

func TestToolEventsReachTheToolEventsStream(t *testing.T) {
	h := newHarness(t)
	req := h.request("write_file", map[string]any{"path": "a.txt", "content": "abc"})
	h.run(req)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The tool event is published after the result the harness waited for.
	var m *jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		var err error
		m, err = bus.LastOnSubject(ctx, h.bus.JS, bus.StreamToolEvents, bus.ToolEventSubject("acme"))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "no tool event was stored")
	ev := &heraldpb.ToolEvent{}
	require.NoError(t, bus.Decode(m.Data, ev))
	require.Equal(t, req.GetSessionId()+":"+req.GetCallId(), ev.GetEventId())
	require.Equal(t, "write_file", ev.GetTool())
	require.Equal(t, "runner-1", ev.GetRunner())
	require.Equal(t, "ok", ev.GetStatus())
	require.Positive(t, ev.GetOutputBytes())
}

func TestWorkspaceSymlinkedOutOfTheRootIsRefused(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(h.cfg.WorkspaceRoot, "escape")))
	req := h.request("write_file", map[string]any{"path": "f.txt", "content": "x"})
	req.Workspace = "escape"
	res := h.run(req)
	require.Equal(t, "denied", res.GetStatus())
	require.Contains(t, res.GetContent(), "outside the workspace")
}

func TestShutdownStopsARunningCallAndReportsIt(t *testing.T) {
	h := newHarness(t)
	req := h.request("terminal", map[string]any{"command": heartbeat("beat") + "sleep 60"})
	h.publish(req, req.GetCallId())
	beat := filepath.Join(h.cfg.WorkspaceRoot, "beat")
	require.Eventually(t, func() bool { _, err := os.Stat(beat); return err == nil }, 10*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, h.svc.Shutdown(ctx), context.DeadlineExceeded)
	require.NoError(t, h.svc.Shutdown(context.Background()), "a second Shutdown is a no-op")

	res := h.result(req, 10*time.Second)
	require.Equal(t, "unknown_outcome", res.GetStatus())
	require.Contains(t, res.GetContent(), "stopped")
	requireHeartbeatStops(t, beat, "the command outlived the runner's shutdown")
}

func TestShutdownWithoutStart(t *testing.T) {
	h := newIdleHarness(t, heraldtest.StartBus(t))
	svc, err := New(h.cfg, depsFor(h.bus.NC, h.bus.JS, t))
	require.NoError(t, err)
	require.NoError(t, svc.Shutdown(context.Background()))
}

func TestConfigValidation(t *testing.T) {
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	cfg.ApprovalsMode = "sometimes"
	cfg.Pool = "bad pool"
	cfg.ToolConcurrency = map[string]int{"terminal": 0}
	err := cfg.Validate()
	require.ErrorContains(t, err, "approvals mode")
	require.ErrorContains(t, err, "pool")
	require.ErrorContains(t, err, "concurrency limit of terminal")
}

func TestConfigFromHeraldConfig(t *testing.T) {
	c := config.Default()
	c.Workspace = "/srv/ws"
	c.DataDir = "/srv/data"
	c.ToolOutput.TerminalMaxChars = 1234
	c.Approvals = config.Approvals{Mode: "deny", Timeout: 5 * time.Second}
	c.MCPServers = map[string]config.MCPServer{"gh": {Command: "gh-mcp"}}
	cfg := ConfigFrom(c)
	require.Equal(t, "/srv/ws", cfg.WorkspaceRoot)
	require.Equal(t, "/srv/data/checkpoints", cfg.CheckpointDir)
	require.Equal(t, 1234, cfg.TerminalMaxChars)
	require.Equal(t, 2000, cfg.ReadFileMaxLines)
	require.Equal(t, ApprovalsDeny, cfg.ApprovalsMode)
	require.Equal(t, 5*time.Second, cfg.ApprovalTimeout)
	require.Equal(t, bus.DefaultPool, cfg.Pool)
	require.Contains(t, cfg.MCPServers, "gh")
	require.NoError(t, cfg.Validate())
}
