package toolrunner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// dangerous deletes a folder the test creates, so "it ran" is visible.
const dangerous = "rm -rf victim"

func withVictim(t *testing.T, h *harness) string {
	dir := filepath.Join(h.cfg.WorkspaceRoot, "victim")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

func answer(t *testing.T, h *harness, in proto.Input) {
	data, err := json.Marshal(in)
	require.NoError(t, err)
	require.NoError(t, h.bus.NC.Publish(bus.SessionInput(h.sid), data))
}

func TestDangerousCommandRunsWhenApprovedOnTheInputSubject(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ApprovalTimeout = 10 * time.Second })
	victim := withVictim(t, h)
	evs := h.events()
	req := h.request("terminal", map[string]any{"command": dangerous})
	h.publish(req, req.GetCallId())

	ev := waitEvent(t, evs, proto.EventApproval)
	require.Equal(t, dangerous, ev.Args)
	require.NotEmpty(t, ev.RequestID)
	require.Contains(t, ev.Message, "recursive")
	answer(t, h, proto.Input{RequestID: "someone-else", Approved: ptr(true)})
	yes := true
	answer(t, h, proto.Input{RequestID: ev.RequestID, Approved: &yes})

	res := h.result(req, 10*time.Second)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.NoDirExists(t, victim)
}

func ptr[T any](v T) *T { return &v }

func TestDangerousCommandIsDeniedWithoutAnAnswer(t *testing.T) {
	h := newHarness(t)
	victim := withVictim(t, h)
	res := h.call("terminal", map[string]any{"command": dangerous})
	require.Equal(t, "denied", res.GetStatus())
	require.Contains(t, res.GetContent(), "nobody approved it")
	require.DirExists(t, victim)
}

func TestDangerousCommandRefusedByTheUser(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ApprovalTimeout = 10 * time.Second })
	victim := withVictim(t, h)
	evs := h.events()
	req := h.request("terminal", map[string]any{"command": dangerous})
	h.publish(req, req.GetCallId())
	ev := waitEvent(t, evs, proto.EventApproval)
	answer(t, h, proto.Input{RequestID: ev.RequestID, Answer: "no"})
	res := h.result(req, 10*time.Second)
	require.Equal(t, "denied", res.GetStatus())
	require.Contains(t, res.GetContent(), "refused")
	require.DirExists(t, victim)
}

func TestApprovalModes(t *testing.T) {
	cases := []struct {
		name      string
		mode      string
		approved  bool
		command   string
		wantRun   bool
		wantInMsg string
	}{
		{"yes pre-approves dangerous", ApprovalsManual, true, dangerous, true, ""},
		{"mode off runs dangerous", ApprovalsOff, false, dangerous, true, ""},
		{"mode deny refuses dangerous", ApprovalsDeny, true, dangerous, false, "approvals are set to deny"},
		{"yes never approves blocked", ApprovalsManual, true, "rm -rf / ; rm -rf victim", false, "never allowed"},
		{"mode off never approves blocked", ApprovalsOff, false, "sudo  reboot && rm -rf victim", false, "never allowed"},
	}
	h := newHarness(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			victim := withVictim(t, h)
			req := h.request("terminal", map[string]any{"command": tc.command})
			req.Approved, req.ApprovalsMode = tc.approved, tc.mode
			res := h.run(req)
			if tc.wantRun {
				require.Equal(t, "ok", res.GetStatus(), res.GetContent())
				require.NoDirExists(t, victim)
				return
			}
			require.Equal(t, "denied", res.GetStatus())
			require.Contains(t, res.GetContent(), tc.wantInMsg)
			require.DirExists(t, victim)
		})
	}
}
