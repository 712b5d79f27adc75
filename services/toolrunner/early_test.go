package toolrunner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
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

func TestAReadOfAFIFOIsRefusedAtOnce(t *testing.T) {
	h := newHarness(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(h.cfg.WorkspaceRoot, "pipe"), 0o644))
	res := h.call("read_file", map[string]any{"path": "pipe"})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "pipe is not a regular file")
	require.Contains(t, h.call("read_file", map[string]any{"path": "pipe"}).GetContent(), "not a regular file",
		"the runner is not stuck on the first")
}

// A read that panics while its checks are on their way is handled as a
// panic in the handler is: the call comes back and, still panicking, is
// dead-lettered with the reason; the runner goes on.
func TestAnEarlyReadThatPanicsIsAPanicOfItsCall(t *testing.T) {
	h := newIdleHarness(t, heraldtest.StartBus(t))
	nc, js := h.bus.Connect(t, "runner-1")
	svc, err := New(h.cfg, depsFor(nc, js, t))
	require.NoError(t, err)
	read := svc.tools["read_file"]
	svc.tools["read_file"] = func(ctx context.Context, c *call) outcome {
		var a readArgs
		if decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a) == nil && a.Path == "boom.txt" {
			panic("read_file blew up")
		}
		return read(ctx, c)
	}
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})

	req := h.request("read_file", map[string]any{"path": "boom.txt"})
	h.publish(req, req.GetSessionId()+":"+req.GetCallId())
	require.Eventually(t, func() bool {
		for _, dl := range heraldtest.DeadLetters(t, h.bus.JS, bus.StreamToolCalls) {
			if strings.Contains(dl.Header.Get(bus.HeaderError), "handler panicked: read_file blew up") {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the panicking call is dead-lettered with its reason")
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "fine.txt"), []byte("still reading"), 0o644))
	require.Contains(t, h.call("read_file", map[string]any{"path": "fine.txt"}).GetContent(), "still reading")
}
