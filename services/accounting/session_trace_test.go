package accounting

import (
	"testing"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// The trace lays a session out in the loop's order whatever the stored
// (whole-second) times say: each step's attempts, its tool calls, then the
// subagent it delegated to; a retry and a fallback are marked where a
// failed attempt precedes them.
func TestTraceFollowsTheLoopsOrder(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	det := SessionDetail{SessionID: "p", Tenant: "acme",
		Steps: []Step{
			{EventID: "p:1:2:1:2", SessionID: "p", TS: at, Model: "backup", Status: "ok", Attempt: 2, Fallback: true, LatencyMs: 30},
			{EventID: "p-t1s1c0:1:1:0:1", SessionID: "p-t1s1c0", TS: at, Model: "m", Status: "ok", Attempt: 1, LatencyMs: 40, Purpose: "subagent"},
			{EventID: "p:1:1:0:2", SessionID: "p", TS: at, Model: "m", Status: "ok", Attempt: 2, LatencyMs: 10},
			{EventID: "p:1:1:0:1", SessionID: "p", TS: at, Model: "m", Status: "error", ErrorClass: "server_error", Attempt: 1, LatencyMs: 5},
			{EventID: "p:1:2:1:1", SessionID: "p", TS: at, Model: "m", Status: "error", ErrorClass: "overloaded", Attempt: 1, LatencyMs: 5},
		},
		Tools: []ToolEntry{
			{SessionID: "p", CallID: "t1s1c1", Tool: "read_file", TS: at, Status: "ok", DurationMs: 3},
			{SessionID: "p-t1s1c0", CallID: "t1s1c0", Tool: "terminal", TS: at, Status: "ok", DurationMs: 7},
		},
	}
	entries := map[string][]*heraldpb.TranscriptEntry{"p": {
		{Turn: 1, Message: &heraldpb.ChatMessage{Role: "user", Content: "do it"}},
		{Turn: 1, Message: &heraldpb.ChatMessage{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{
			{Id: "a", Name: "delegate_task", Arguments: `{"goal":"g"}`}, {Id: "b", Name: "read_file", Arguments: `{"path":"x"}`}}}},
		{Turn: 1, Message: &heraldpb.ChatMessage{Role: "tool", ToolCallId: "b", Content: "contents of x"}},
		{Turn: 1, Message: &heraldpb.ChatMessage{Role: "assistant", Content: "done"}},
	}}
	tr := buildTrace(det, entries)
	require.Len(t, tr.Turns, 1)
	require.Equal(t, "do it", tr.Turns[0].Prompt.Short)
	var got []string
	for _, sp := range tr.Turns[0].Spans {
		name := sp.Name
		switch {
		case sp.Retry:
			name += " retry"
		case sp.Fallback:
			name += " fallback"
		}
		if sp.Subagent != "" {
			name = "subagent " + name
		}
		got = append(got, name)
	}
	require.Equal(t, []string{"chat m", "chat m retry", "execute_tool read_file", "subagent chat m",
		"subagent execute_tool terminal", "chat m", "chat backup fallback"}, got)
	spans := tr.Turns[0].Spans
	require.Equal(t, `{"path":"x"}`, spans[2].Arguments.Full)
	require.Equal(t, "contents of x", spans[2].Result.Full)
	require.Equal(t, "done", spans[6].Output.Full)
	require.Equal(t, int64(5+10+3+40+7+5+30), tr.DurationMs, "the waterfall is the calls end to end")
	for i := 1; i < len(spans); i++ {
		require.GreaterOrEqual(t, spans[i].OffsetMs, spans[i-1].OffsetMs)
	}
}
