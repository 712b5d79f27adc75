package memory

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

const wait = 10 * time.Second

func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.IndexPath = filepath.Join(t.TempDir(), "session-index.gob")
	cfg.IndexSaveEvery = 50 * time.Millisecond
	return cfg
}

func startService(t testing.TB, b *heraldtest.Bus, cfg Config, name string) *Service {
	t.Helper()
	nc, js := b.Connect(t, name)
	s, err := New(cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t), Instance: name})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// call publishes a tool call the way the loop does and waits for its result.
func call(t testing.TB, b *heraldtest.Bus, sid, callID, tenant, tool string, args any) *heraldpb.ToolResult {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		data, err := json.Marshal(args)
		require.NoError(t, err)
		raw = string(data)
	}
	req := &heraldpb.ToolCallRequest{CallId: callID, SessionId: sid, TaskId: "task-" + sid, Tenant: tenant, Tool: tool, Arguments: raw}
	ctx := context.Background()
	require.NoError(t, bus.PublishProto(ctx, b.JS, bus.MemoryCall(sid), sid+":"+callID, req))
	return waitResult(t, b.JS, sid, callID)
}

func waitResult(t testing.TB, js jetstream.JetStream, sid, callID string) *heraldpb.ToolResult {
	t.Helper()
	var res heraldpb.ToolResult
	require.Eventually(t, func() bool {
		m, err := bus.LastOnSubject(context.Background(), js, bus.StreamToolResults, bus.ToolResult(sid, callID))
		return err == nil && proto.Unmarshal(m.Data, &res) == nil
	}, wait, 5*time.Millisecond)
	return &res
}

type outcome struct {
	Success bool     `json:"success"`
	Error   string   `json:"error"`
	Message string   `json:"message"`
	Entries []string `json:"entries"`
	Usage   string   `json:"usage"`
	Results []Hit    `json:"results"`
}

func decodeOutcome(t testing.TB, res *heraldpb.ToolResult) outcome {
	t.Helper()
	var o outcome
	require.NoError(t, json.Unmarshal([]byte(res.Content), &o), res.Content)
	return o
}

func snapshot(t testing.TB, b *heraldtest.Bus, payload string) Snapshot {
	t.Helper()
	m, err := b.NC.Request(bus.MemorySnapshotSubject, []byte(payload), wait)
	require.NoError(t, err)
	var s Snapshot
	require.NoError(t, json.Unmarshal(m.Data, &s))
	return s
}

func memArgs(action, target, content, old string) map[string]string {
	return map[string]string{"action": action, "target": target, "content": content, "old_text": old}
}
