package toolrunner

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A read-only call starts before its checks come back (early.go); these
// pin that what it read never stands in for what the checks decide.

func TestAReadThePolicyRefusesShowsNothingOfTheFile(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "secret.txt"), []byte("the launch code is 0000"), 0o644))
	events := h.events()
	policyPlugin(t, h, func(req map[string]any) []byte {
		args, _ := req["arguments"].(map[string]any)
		if args["path"] == "secret.txt" {
			return []byte(`{"allow": false, "reason": "policy: secret.txt is not for models"}`)
		}
		return []byte(`{"allow": true}`)
	})

	res := h.call("read_file", map[string]any{"path": "secret.txt"})
	require.Equal(t, "denied", res.GetStatus())
	require.Equal(t, "policy: secret.txt is not for models", res.GetContent())
	ev := waitEvent(t, events, proto.EventToolFinished)
	require.Equal(t, "denied", ev.Status)

	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "open.txt"), []byte("anyone may read this"), 0o644))
	require.Contains(t, h.call("read_file", map[string]any{"path": "open.txt"}).GetContent(), "anyone may read this")
}

func TestAReadWithAStoredResultIsAnsweredAsStored(t *testing.T) {
	h := newHarness(t)
	path := filepath.Join(h.cfg.WorkspaceRoot, "notes.txt")
	require.NoError(t, os.WriteFile(path, []byte("changed since"), 0o644))
	req := h.request("read_file", map[string]any{"path": "notes.txt"})
	// The call ran long ago, past the dedupe window: its result is stored
	// under another message id, and the loop sends the call again.
	ctx := context.Background()
	subject := bus.ToolResult(req.GetSessionId(), req.GetCallId())
	stored := &heraldpb.ToolResult{CallId: req.GetCallId(), SessionId: req.GetSessionId(), Tool: "read_file", Status: "ok",
		Content: "1\tas first read"}
	require.NoError(t, bus.PublishProto(ctx, h.bus.JS, subject, "long-ago", stored))

	h.run(req)
	h.drained()
	require.Equal(t, "1\tas first read", lastResult(t, h.bus.JS, req).GetContent())
	s, err := h.bus.JS.Stream(ctx, bus.StreamToolResults)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Subjects[subject], "no second result was stored")
}

func TestAReadOfAToolTheBreakerDisabledIsRefused(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		res := h.call("read_file", map[string]any{"path": "later.txt"})
		require.Equal(t, "error", res.GetStatus(), res.GetContent())
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "later.txt"), []byte("here now"), 0o644))
	res := h.call("read_file", map[string]any{"path": "later.txt"})
	require.Contains(t, res.GetContent(), "disabled for this session")
	require.NotContains(t, res.GetContent(), "here now")
}
