package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// harness is a tool runner on a real in-process JetStream, driven as the
// loop drives it: calls published on TOOL_CALLS, results read back from
// TOOL_RESULTS.
type harness struct {
	t   *testing.T
	bus *heraldtest.Bus
	svc *Service
	cfg Config
	sid string
}

var callSeq atomic.Int64

func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = t.TempDir()
	cfg.CheckpointDir = t.TempDir()
	cfg.Concurrency = 4
	cfg.ApprovalTimeout = 300 * time.Millisecond
	cfg.TerminalTimeout = 20 * time.Second
	return cfg
}

func newHarness(t *testing.T, mutate ...func(*Config)) *harness {
	t.Helper()
	h := newIdleHarness(t, heraldtest.StartBus(t), mutate...)
	h.svc = h.startRunner("runner-1", h.cfg)
	return h
}

// newIdleHarness has a bus and a configuration but no runner yet.
func newIdleHarness(t *testing.T, b *heraldtest.Bus, mutate ...func(*Config)) *harness {
	t.Helper()
	cfg := testConfig(t)
	for _, m := range mutate {
		m(&cfg)
	}
	return &harness{t: t, bus: b, cfg: cfg, sid: fmt.Sprintf("s%d", callSeq.Add(1))}
}

// startRunner starts another runner (as another process would) on its own connection.
func (h *harness) startRunner(name string, cfg Config) *Service {
	h.t.Helper()
	nc, js := h.bus.Connect(h.t, name)
	deps := depsFor(nc, js, h.t)
	deps.Instance = name
	svc, err := New(cfg, deps)
	require.NoError(h.t, err)
	require.NoError(h.t, svc.Start(context.Background()))
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	return svc
}

func (h *harness) request(tool string, args any) *heraldpb.ToolCallRequest {
	text, ok := args.(string)
	if !ok {
		data, err := json.Marshal(args)
		require.NoError(h.t, err)
		text = string(data)
	}
	return &heraldpb.ToolCallRequest{CallId: fmt.Sprintf("call_%d", callSeq.Add(1)), SessionId: h.sid,
		TaskId: "t1", Tenant: "acme", Step: 1, Tool: tool, Arguments: text, Pool: bus.DefaultPool}
}

// publish puts req on the work queue under a fresh message id (a repeated
// publish of one call would be deduplicated by the stream).
func (h *harness) publish(req *heraldpb.ToolCallRequest, msgID string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(h.t, bus.PublishProto(ctx, h.bus.JS, bus.ToolCall(bus.DefaultPool, req.GetSessionId()), msgID, req))
}

// call runs one tool call through the bus and returns its result.
func (h *harness) call(tool string, args any) *heraldpb.ToolResult {
	h.t.Helper()
	return h.run(h.request(tool, args))
}

func (h *harness) run(req *heraldpb.ToolCallRequest) *heraldpb.ToolResult {
	h.t.Helper()
	h.publish(req, req.GetSessionId()+":"+req.GetCallId())
	return h.result(req, 30*time.Second)
}

func (h *harness) result(req *heraldpb.ToolCallRequest, wait time.Duration) *heraldpb.ToolResult {
	h.t.Helper()
	var res *heraldpb.ToolResult
	require.Eventually(h.t, func() bool {
		res = lastResult(h.t, h.bus.JS, req)
		return res != nil
	}, wait, 10*time.Millisecond, "no result for %s", req.GetTool())
	return res
}

func lastResult(t testing.TB, js jetstream.JetStream, req *heraldpb.ToolCallRequest) *heraldpb.ToolResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := bus.LastOnSubject(ctx, js, bus.StreamToolResults, bus.ToolResult(req.GetSessionId(), req.GetCallId()))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	require.NoError(t, err)
	res := &heraldpb.ToolResult{}
	require.NoError(t, bus.Decode(m.Data, res))
	return res
}

// events subscribes to the session's progress events.
func (h *harness) events() <-chan proto.Event {
	ch := make(chan proto.Event, 256)
	sub, err := h.bus.NC.Subscribe(bus.SessionEvents(h.sid), func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			ch <- ev
		}
	})
	require.NoError(h.t, err)
	require.NoError(h.t, h.bus.NC.Flush())
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

// waitEvent returns the first event of type typ.
func waitEvent(t *testing.T, ch <-chan proto.Event, typ string) proto.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Type == typ {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", typ)
		}
	}
}

// waitCallEvent returns the first event of type typ about the call callID.
func waitCallEvent(t *testing.T, ch <-chan proto.Event, typ, callID string) proto.Event {
	t.Helper()
	for {
		if ev := waitEvent(t, ch, typ); ev.CallID == callID {
			return ev
		}
	}
}

// drained waits until the runner has acknowledged everything queued.
func (h *harness) drained() {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := bus.PendingWork(ctx, h.bus.JS, bus.StreamToolCalls)
		require.NoError(h.t, err)
		return n == 0
	}, 20*time.Second, 10*time.Millisecond)
}

func terminalOf(t *testing.T, res *heraldpb.ToolResult) terminalReply {
	t.Helper()
	var r terminalReply
	require.NoError(t, json.Unmarshal([]byte(res.GetContent()), &r), res.GetContent())
	return r
}

func depsFor(nc *nats.Conn, js jetstream.JetStream, t *testing.T) service.Deps {
	return service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t), Config: config.Default()}
}

// heldWorkspace is folder dir opened as a call's workspace is (the sandbox
// binds the folder held, not its path).
func heldWorkspace(t testing.TB, dir string) workspace {
	t.Helper()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.Close() })
	return workspace{root: dir, dir: root}
}
