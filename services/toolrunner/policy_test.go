package toolrunner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// policyPlugin is a plugin on its own NATS connection answering
// pre_tool_call with answer; it returns the requests it saw.
func policyPlugin(t *testing.T, h *harness, answer func(req map[string]any) []byte) <-chan map[string]any {
	t.Helper()
	nc, _ := h.bus.Connect(t, "policy-plugin")
	seen := make(chan map[string]any, 100)
	sub, err := nc.Subscribe(bus.HookPreToolCall(), func(m *nats.Msg) {
		var req map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &req))
		seen <- req
		if reply := answer(req); reply != nil {
			_ = m.Respond(reply)
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return seen
}

func TestPreToolCallPolicyRefusesACall(t *testing.T) {
	h := newHarness(t)
	events := h.events()
	seen := policyPlugin(t, h, func(req map[string]any) []byte {
		args, _ := req["arguments"].(map[string]any)
		if cmd, _ := args["command"].(string); strings.Contains(cmd, "curl") {
			return []byte(`{"allow": false, "reason": "policy: no network tools in tenant acme"}`)
		}
		return []byte(`{"allow": true}`)
	})
	req := h.request("terminal", map[string]any{"command": "curl http://example.com > got.txt"})
	res := h.run(req)
	require.Equal(t, "denied", res.GetStatus())
	require.True(t, res.GetIsError())
	require.Equal(t, "policy: no network tools in tenant acme", res.GetContent())
	require.NoFileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "got.txt"))

	asked := <-seen
	require.Equal(t, h.sid, asked["session_id"])
	require.Equal(t, "acme", asked["tenant"])
	require.Equal(t, "terminal", asked["tool"])
	require.Equal(t, map[string]any{"command": "curl http://example.com > got.txt"}, asked["arguments"])

	ev := waitEvent(t, events, proto.EventToolFinished)
	require.Equal(t, "denied", ev.Status)
	require.Eventually(t, func() bool {
		for _, te := range storedToolEvents(t, h.bus.JS) {
			if te.GetCallId() == req.GetCallId() {
				return te.GetStatus() == "denied"
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "the tool_events row says denied")

	// Allowed calls run as usual.
	require.Equal(t, "ok", h.call("terminal", map[string]any{"command": "echo fine"}).GetStatus())
}

func TestPreToolCallCoversExecuteCodesInnerCalls(t *testing.T) {
	h := newHarness(t)
	seen := policyPlugin(t, h, func(req map[string]any) []byte {
		if req["tool"] == "write_file" {
			return []byte(`{"allow": false, "reason": "writes need a ticket"}`)
		}
		return []byte(`{"allow": true}`)
	})
	req := h.request("execute_code", map[string]any{"code": `
from herald_tools import write_file, read_file, ToolError
try:
    write_file(path="x.txt", content="x")
except ToolError as e:
    print("refused:", e)
`})
	res := h.run(req)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "refused: writes need a ticket")
	require.NoFileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "x.txt"))
	require.Equal(t, "execute_code", (<-seen)["tool"])
	inner := <-seen
	require.Equal(t, "write_file", inner["tool"])
	require.Equal(t, req.GetCallId()+"-code1", inner["call_id"])
	require.Equal(t, "denied", innerResult(t, h, req, "1").GetStatus())
}

func TestPreToolCallWithoutAPolicy(t *testing.T) {
	t.Run("optional: the call runs", func(t *testing.T) {
		h := newHarness(t)
		require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "a.txt", "content": "a"}).GetStatus())
	})
	t.Run("required: every call is refused, saying why", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.Hooks.PreToolCallRequired = true })
		res := h.call("write_file", map[string]any{"path": "a.txt", "content": "a"})
		require.Equal(t, "denied", res.GetStatus())
		require.Contains(t, res.GetContent(), "hooks.pre_tool_call is required and no policy service answered")
		require.NoFileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "a.txt"))
		// A policy that appears is asked from then on.
		policyPlugin(t, h, func(map[string]any) []byte { return []byte(`{"allow": true}`) })
		require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "a.txt", "content": "a"}).GetStatus())
	})
}

func TestBadOrSlowPolicyRepliesCountAsNoReply(t *testing.T) {
	logs := &heraldtest.SyncBuffer{}
	h := newIdleHarness(t, heraldtest.StartBus(t), func(c *Config) { c.Hooks.Timeout = 100 * time.Millisecond })
	nc, js := h.bus.Connect(t, "runner-1")
	deps := depsFor(nc, js, t)
	deps.Log = zerolog.New(logs)
	svc, err := New(h.cfg, deps)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })

	replies := make(chan []byte, 10)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	policyPlugin(t, h, func(map[string]any) []byte {
		r := <-replies
		if string(r) == "slow" {
			<-release // answers only after the runner stopped waiting
			return []byte(`{"allow": false, "reason": "too late"}`)
		}
		return r
	})
	for i, bad := range []string{`not json`, `{"allow": "no"}`, `["allow", false]`, `{"reason": "no allow field"}`, "slow"} {
		replies <- []byte(bad)
		res := h.call("write_file", map[string]any{"path": "f.txt", "content": bad})
		require.Equal(t, "ok", res.GetStatus(), "reply %d (%s) must count as no reply", i, bad)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "ignoring a hook reply"), logs.String())
	require.Equal(t, "slow", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "f.txt")))))
}
