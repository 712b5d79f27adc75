package toolrunner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func (h *harness) code(program string) *heraldpb.ToolResult {
	h.t.Helper()
	return h.call("execute_code", map[string]any{"code": program})
}

// storedToolEvents reads every tool event stored so far.
func storedToolEvents(t *testing.T, js jetstream.JetStream) []*heraldpb.ToolEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.StreamToolEvents)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []*heraldpb.ToolEvent
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev := &heraldpb.ToolEvent{}
		require.NoError(t, bus.Decode(m.Data, ev))
		out = append(out, ev)
	}
	return out
}

func innerResult(t *testing.T, h *harness, parent *heraldpb.ToolCallRequest, n string) *heraldpb.ToolResult {
	t.Helper()
	return lastResult(t, h.bus.JS, &heraldpb.ToolCallRequest{SessionId: parent.GetSessionId(), CallId: parent.GetCallId() + "-code" + n})
}

func TestExecuteCodeMakesRealToolCallsAndReturnsWhatItPrints(t *testing.T) {
	h := newHarness(t)
	events := h.events()
	req := h.request("execute_code", map[string]any{"code": `
from herald_tools import terminal, read_file, write_file, patch, search_files
import json
for i in range(3):
    write_file(path=f"notes/{i}.txt", content=f"note {i}\n")
patch(path="notes/1.txt", old_string="note 1", new_string="NOTE ONE")
print(read_file(path="notes/1.txt"))
print(search_files(pattern="NOTE", path="notes"))
out = json.loads(terminal(command="ls notes | wc -l"))
print("files:", out["output"].strip(), "exit", out["exit_code"])
`})
	res := h.run(req)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "NOTE ONE")
	require.Contains(t, res.GetContent(), "notes/1.txt")
	require.Contains(t, res.GetContent(), "files: 3 exit 0")
	require.Equal(t, "note 0\n", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "notes/0.txt")))))

	// Every call the program made is a call of the session, with its own
	// stored result, progress events and tool_events row.
	for n, tool := range map[string]string{"1": "write_file", "4": "patch", "5": "read_file", "7": "terminal"} {
		r := innerResult(t, h, req, n)
		require.NotNil(t, r, "no stored result for inner call %s", n)
		require.Equal(t, tool, r.GetTool())
		require.Equal(t, h.sid, r.GetSessionId())
	}
	seen := map[string]bool{}
	for len(seen) < 8 {
		ev := waitEvent(t, events, proto.EventToolFinished)
		seen[ev.CallID] = true
	}
	require.True(t, seen[req.GetCallId()+"-code7"])
	require.Eventually(t, func() bool {
		byCall := map[string]*heraldpb.ToolEvent{}
		for _, ev := range storedToolEvents(t, h.bus.JS) {
			byCall[ev.GetCallId()] = ev
		}
		inner := byCall[req.GetCallId()+"-code7"]
		return len(byCall) == 8 && inner != nil && inner.GetTool() == "terminal" && inner.GetSessionId() == h.sid && inner.GetTenant() == "acme"
	}, 5*time.Second, 20*time.Millisecond, "one tool_events row per call, the program's and each of its seven")
}

func TestExecuteCodeToolErrorCanBeCaught(t *testing.T) {
	h := newHarness(t)
	res := h.code(`
import herald_tools
try:
    herald_tools.read_file(path="../../etc/passwd")
except herald_tools.ToolError as e:
    print("caught:", e)
`)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "caught: refused")
	require.Contains(t, res.GetContent(), "outside the workspace")
}

func TestExecuteCodeReturnsPythonsMessageForBrokenPrograms(t *testing.T) {
	h := newHarness(t)
	res := h.code("print('before')\ndef broken(:\n    pass\n")
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "SyntaxError")
	require.Contains(t, res.GetContent(), `File "<execute_code>", line 2`)
	require.NotContains(t, res.GetContent(), "before", "a program that does not compile does not run")

	res = h.code("print('half way')\nx = {}\nprint(x['missing'])\n")
	require.Equal(t, "error", res.GetStatus())
	require.Contains(t, res.GetContent(), "half way")
	require.Contains(t, res.GetContent(), "KeyError: 'missing'")
	require.Contains(t, res.GetContent(), `File "<execute_code>", line 3`)
	require.Contains(t, res.GetContent(), "print(x['missing'])", "the traceback shows the program's own line")
	require.NotContains(t, res.GetContent(), "_main", "the bootstrap's frames are not the model's concern")
	require.Contains(t, res.GetContent(), "exited with status 1")

	// Broken programs are the model's to fix: they never trip the breaker.
	for range 3 {
		require.Equal(t, "error", h.code("raise ValueError('again')").GetStatus())
	}
	require.Equal(t, "ok", h.code("print('fine')").GetStatus())
}

func TestExecuteCodeStopsAtTheToolCallLimit(t *testing.T) {
	h := newHarness(t)
	require.Equal(t, 50, h.cfg.Code.MaxToolCalls)
	res := h.code(`
from herald_tools import write_file, ToolError
done = 0
try:
    for i in range(60):
        write_file(path=f"f{i}.txt", content="x")
        done += 1
except ToolError as e:
    print("stopped after", done, "-", e)
`)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "stopped after 50 - execute_code allows at most 50 tool calls per program (code_execution.max_tool_calls)")
	require.FileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "f49.txt"))
	require.NoFileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "f50.txt"))
}

func TestExecuteCodeIsStoppedAtItsTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Code.Timeout = time.Second })
	start := time.Now()
	res := h.code("import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('never')\n")
	require.Less(t, time.Since(start), 20*time.Second)
	require.Equal(t, "timeout", res.GetStatus())
	require.Contains(t, res.GetContent(), "started")
	require.Contains(t, res.GetContent(), "stopped the program after 1s")
	require.NotContains(t, res.GetContent(), "never")
}

func TestExecuteCodeOutputIsCappedWithHeadAndTail(t *testing.T) {
	h := newHarness(t)
	res := h.code("print('HEAD'); print('x' * 200000); print('TAIL')\n")
	require.Equal(t, "ok", res.GetStatus())
	require.LessOrEqual(t, utf8.RuneCountInString(res.GetContent()), 50000, "the cap counts the marker")
	require.Greater(t, utf8.RuneCountInString(res.GetContent()), 49000)
	require.True(t, strings.HasPrefix(res.GetContent(), "HEAD\n"))
	require.True(t, strings.HasSuffix(strings.TrimSpace(res.GetContent()), "TAIL"))
	require.Contains(t, res.GetContent(), "characters truncated")
}

func TestExecuteCodeOffersOnlyTheFiveTools(t *testing.T) {
	h := newHarness(t)
	res := h.code(`
import herald_tools
try:
    herald_tools._call("clarify", question="may I?")
except herald_tools.ToolError as e:
    print(e)
`)
	require.Contains(t, res.GetContent(), `"clarify" cannot be called from execute_code`)
}

func TestTruncateWithinNeverExceedsItsLimit(t *testing.T) {
	for _, n := range []int{10, 999, 50001, 123456} {
		s := strings.Repeat("é", n)
		for _, max := range []int{200, 1000, 50000} {
			out := truncateWithin(s, max)
			require.LessOrEqual(t, utf8.RuneCountInString(out), max)
			if n <= max {
				require.Equal(t, s, out)
			}
		}
	}
}

// A program's dangerous command asks for approval like the model's own.
func TestExecuteCodeInnerCommandsNeedApproval(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ApprovalTimeout = 10 * time.Second })
	victim := withVictim(t, h)
	evs := h.events()
	req := h.request("execute_code", map[string]any{"code": `
from herald_tools import terminal, ToolError
for attempt in ("refused", "approved"):
    try:
        terminal(command="` + dangerous + `")
        print(attempt, "ran")
    except ToolError as e:
        print(attempt, "->", e)
`})
	h.publish(req, req.GetCallId())
	first := waitEvent(t, evs, proto.EventApproval)
	require.Equal(t, dangerous, first.Args)
	answer(t, h, proto.Input{RequestID: first.RequestID, Approved: ptr(false)})
	second := waitEvent(t, evs, proto.EventApproval)
	require.NotEqual(t, first.RequestID, second.RequestID)
	answer(t, h, proto.Input{RequestID: second.RequestID, Approved: ptr(true)})

	res := h.result(req, 20*time.Second)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "refused -> denied")
	require.Contains(t, res.GetContent(), "the user refused it")
	require.Contains(t, res.GetContent(), "approved ran")
	require.NoDirExists(t, victim)
}

func TestExecuteCodeSeesNoSecretsAndNoPlumbing(t *testing.T) {
	t.Setenv("VENDOR_API_KEY", "sk-very-secret")
	t.Setenv("HERALD_NATS_URL", "nats://loop:pw@nats:4222")
	t.Setenv("HARMLESS_SETTING", "visible")
	h := newHarness(t)
	res := h.code("import os\nprint(sorted(os.environ))\n")
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "HARMLESS_SETTING")
	for _, hidden := range []string{"VENDOR_API_KEY", "HERALD_NATS_URL", "HERALD_TOOLS_SOURCE", "HERALD_TOOLS_FDS"} {
		require.NotContains(t, res.GetContent(), hidden)
	}
}

// A command that already passes descriptors on (as a sandbox may) moves
// the program's pipes, and the program still finds them.
func TestExecuteCodePipesFollowOtherInheritedDescriptors(t *testing.T) {
	h := newHarness(t)
	c := &call{req: h.request("execute_code", map[string]any{}), ws: workspace{root: h.cfg.WorkspaceRoot}}
	br, err := h.svc.openBridge(context.Background(), c, "from herald_tools import write_file\nprint(write_file(path='moved.txt', content='ok'))\n")
	require.NoError(t, err)
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	sandboxFD := func(cmd *exec.Cmd) { cmd.ExtraFiles = append(cmd.ExtraFiles, devnull) }
	env := append(os.Environ(), "HERALD_TOOLS_SOURCE="+heraldToolsSource)
	out, code, err := h.svc.runCommand(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), programCommand(h.cfg.Code.Python), env, 20*time.Second, 1<<16, sandboxFD, br.attach)
	br.close()
	require.NoError(t, err)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "moved.txt")
	require.Equal(t, "ok", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "moved.txt")))))
}

func TestExecuteCodeOutputThatIsNotUTF8StillComesBack(t *testing.T) {
	h := newHarness(t)
	res := h.code("import sys\nsys.stdout.buffer.write(b'bytes: \\xff\\xfe end\\n')\n")
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.True(t, utf8.ValidString(res.GetContent()))
	require.Contains(t, res.GetContent(), "bytes: ")
	require.Contains(t, res.GetContent(), " end")
}

// A program that writes to the runner's pipe itself gets told what is
// wrong, and the runner keeps serving it.
func TestExecuteCodeMalformedRequestsAreAnsweredNotFatal(t *testing.T) {
	h := newHarness(t)
	res := h.code(`
import herald_tools, json
herald_tools._requests.write("this is not json\n")
herald_tools._requests.flush()
print(json.loads(herald_tools._replies.readline())["error"])
print(herald_tools.write_file(path="after.txt", content="still served"))
`)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "unreadable request from herald_tools")
	require.Contains(t, res.GetContent(), "after.txt")
	require.Equal(t, "still served", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "after.txt")))))
}

func TestExecuteCodeSaysWhenCommandsHaveNoPython(t *testing.T) {
	o := codeOutcome("bash: line 1: exec: python3: not found\n", 127, nil, DefaultConfig().Code)
	require.Equal(t, "error", o.status)
	require.False(t, o.correctable, "a missing interpreter is the runner's problem, not the model's")
	require.Contains(t, o.content, "execute_code needs python3 where commands run")
}
