package toolrunner

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// publishRead puts a quick read on its own subject, as the loop does.
func (h *harness) publishRead(t *testing.T, tool string, args any) *heraldpb.ToolCallRequest {
	t.Helper()
	req := h.request(tool, args)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, bus.PublishProto(ctx, h.bus.JS, bus.ToolRead(bus.DefaultPool, req.GetSessionId()), req.GetSessionId()+":"+req.GetCallId(), req))
	return req
}

// A runner whose every command slot runs a long command still answers
// reads at once: they come on a consumer of their own. Before, a read
// waited in line until a command ended: its result was stored after the
// command's.
func TestReadsDoNotWaitBehindLongCommands(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Concurrency = 1; c.ApprovalsMode = ApprovalsOff })
	require.False(t, h.call("write_file", map[string]any{"path": "notes.txt", "content": "hello\n"}).GetIsError())
	events := h.events()
	long := h.request("terminal", map[string]any{"command": "sleep 3", "timeout": 60})
	h.publish(long, long.GetSessionId()+":"+long.GetCallId())
	waitCallEvent(t, events, proto.EventToolStarted, long.GetCallId())

	var reads []*heraldpb.ToolCallRequest
	for _, tool := range []struct {
		name string
		args map[string]any
		want string
	}{{"read_file", map[string]any{"path": "notes.txt"}, "hello"}, {"search_files", map[string]any{"pattern": "hel+o"}, "notes.txt"}} {
		read := h.publishRead(t, tool.name, tool.args)
		res := h.result(read, 30*time.Second)
		require.False(t, res.GetIsError(), res.GetContent())
		require.Contains(t, res.GetContent(), tool.want)
		reads = append(reads, read)
	}
	require.False(t, h.result(long, 30*time.Second).GetIsError())
	// the order the results were stored in
	stored := func(req *heraldpb.ToolCallRequest) uint64 {
		m, err := bus.LastOnSubject(context.Background(), h.bus.JS, bus.StreamToolResults, bus.ToolResult(req.GetSessionId(), req.GetCallId()))
		require.NoError(t, err)
		return m.Sequence
	}
	for _, read := range reads {
		require.Less(t, stored(read), stored(long), "%s waited for the command to end", read.GetTool())
	}
}

// A runner started where an older one took every call of the pool on one
// consumer (filter herald.tool.call.<pool>.>) narrows that consumer to the
// calls and adds the reads' beside it, and a read the older runner left on
// the calls' subject is still answered.
func TestARunnerTakesOverAnOlderRunnersConsumer(t *testing.T) {
	h := newIdleHarness(t, heraldtest.StartBus(t))
	ctx := context.Background()
	_, err := h.bus.JS.CreateOrUpdateConsumer(ctx, bus.StreamToolCalls, jetstream.ConsumerConfig{
		Durable: bus.ToolRunnerConsumer(bus.DefaultPool), FilterSubject: "herald.tool.call." + bus.DefaultPool + ".>",
		AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	left := h.request("read_file", map[string]any{"path": "missing.txt"})
	h.publish(left, left.GetSessionId()+":"+left.GetCallId())

	h.svc = h.startRunner("runner-new", h.cfg)
	require.NotNil(t, h.result(left, 10*time.Second))
	read := h.publishRead(t, "read_file", map[string]any{"path": "missing.txt"})
	require.NotNil(t, h.result(read, 10*time.Second))
	for durable, filter := range map[string]string{
		bus.ToolRunnerConsumer(bus.DefaultPool): bus.ToolRunnerFilter(bus.DefaultPool),
		bus.ToolReadsConsumer(bus.DefaultPool):  bus.ToolReadFilter(bus.DefaultPool),
	} {
		c, err := h.bus.JS.Consumer(ctx, bus.StreamToolCalls, durable)
		require.NoError(t, err, durable)
		info, err := c.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{filter}, append(info.Config.FilterSubjects, info.Config.FilterSubject)[:1], durable)
	}
}
