package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A task published inside a caller's trace, whose turn compresses its
// history and delegates to a subagent: the turn hangs under the caller's
// span, the compression (with its summary call) and the child's turn under
// the turn; with content capture on, messages and tool arguments are there.
func TestCallerCompressionAndSubagentSpansJoinTheTurn(t *testing.T) {
	col := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTP)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
	const files = 4
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		switch {
		case len(r.Tools) == 0:
			return scripted.Text("## Goal\nRead the files.\n## Completed actions\nRead some.\n## Remaining work\nDelegate.")
		case strings.HasPrefix(r.FirstUser(), "look into it"):
			return scripted.Text("the child looked into it")
		}
		if next := lastFileRead(r) + 1; next < files {
			// long thoughts: only a summary, not pruning, makes room for them
			return scripted.Reply{Content: strings.Repeat(fmt.Sprintf("thinking about file %d. ", next), 400),
				ToolCalls: []scripted.Call{{Name: "read_file", Args: fmt.Sprintf(`{"path":"f%d.txt"}`, next)}}}
		}
		if !strings.Contains(string(r.Raw), "the child looked into it") {
			return scripted.Tool("delegate_task", `{"goal":"look into it"}`)
		}
		return scripted.Text("all done")
	}, WithConfig(func(c *config.Config) {
		c.ContextWindows = map[string]int{"test-model": 9000}
		c.Compression.ProtectFirstN, c.Compression.ProtectLastN = 2, 2 // leave a middle to summarise
	}))
	for i := range files {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := NewTask("read the files, then delegate")
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	data, err := json.Marshal(task)
	require.NoError(t, err)
	msg := bus.NewMsg(bus.TasksSubject, data)
	msg.Header = nats.Header{"traceparent": []string{"00-" + callerTrace + "-" + callerSpan + "-01"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = h.JS.PublishMsg(ctx, msg)
	require.NoError(t, err)
	res := h.WaitResult(task, 60*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "all done", res.FinalResponse)

	var trace []span
	require.Eventually(t, func() bool {
		trace = nil
		for _, s := range col.spans(t) {
			if s.TraceID == callerTrace {
				trace = append(trace, s)
			}
		}
		return len(named(trace, "invoke_agent herald")) == 1 && len(named(trace, "invoke_agent herald-subagent")) == 1 &&
			len(named(trace, "compress_context")) >= 1
	}, 30*time.Second, 100*time.Millisecond, "the turn, the compression and the child's turn never all arrived")
	root := named(trace, "invoke_agent herald")[0]
	require.Equal(t, callerSpan, root.ParentSpanID, "the turn hangs under the caller's span")
	child := named(trace, "invoke_agent herald-subagent")[0]
	require.Equal(t, root.SpanID, child.ParentSpanID, "the subagent's turn hangs under its parent's turn")
	require.Equal(t, task.SessionID, child.Attrs["herald.parent_session_id"])
	byID := map[string]span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	for _, s := range trace {
		if s.SpanID != root.SpanID {
			_, ok := byID[s.ParentSpanID]
			require.True(t, ok, "span %q hangs outside the tree", s.Name)
		}
	}
	compressions := map[string]bool{}
	for _, c := range named(trace, "compress_context") {
		require.Equal(t, root.SpanID, c.ParentSpanID, "a compression hangs under its turn")
		if c.Attrs["herald.compress.summarized"] == true {
			compressions[c.SpanID] = true
		}
	}
	require.NotEmpty(t, compressions, "a compression wrote a model summary")
	summaries, childCalls := 0, 0
	for _, s := range chats(trace) {
		switch s.Attrs["herald.purpose"] {
		case "compression":
			summaries++
			require.True(t, compressions[s.ParentSpanID], "the summary's model call hangs under its compression")
		case "subagent":
			childCalls++
			require.Equal(t, child.SpanID, s.ParentSpanID, "the child's model call hangs under the child's turn")
		default:
			require.Equal(t, root.SpanID, s.ParentSpanID)
		}
	}
	require.Equal(t, len(compressions), summaries)
	require.Equal(t, 1, childCalls)

	var read span
	for _, s := range named(trace, "execute_tool read_file") {
		if strings.Contains(fmt.Sprint(s.Attrs["gen_ai.tool.call.arguments"]), "f0.txt") {
			read = s
		}
	}
	require.NotEmpty(t, read.SpanID, "tool arguments are recorded when capture is on")
	require.Contains(t, read.Attrs["gen_ai.tool.call.result"], "file 0 line 0")
	var input string
	for _, s := range chats(trace) {
		if s.ParentSpanID == root.SpanID {
			input = fmt.Sprint(s.Attrs["gen_ai.input.messages"])
			require.Contains(t, s.Attrs, "gen_ai.output.messages")
		}
	}
	require.Contains(t, input, "read the files, then delegate", "input messages are recorded when capture is on")
}
