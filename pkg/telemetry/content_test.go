package telemetry

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestTruncateKeepsWholeCharacters(t *testing.T) {
	s := strings.Repeat("é", 10) // two bytes each
	for n := range 21 {
		got := Truncate(s, n)
		require.True(t, utf8.ValidString(got), "cut at %d", n)
		require.LessOrEqual(t, len(strings.TrimSuffix(got, "…[truncated]")), n)
	}
	require.Equal(t, s, Truncate(s, 20))
}

// Recorded messages take the shape of the GenAI conventions'
// gen_ai.input.messages: a role and typed parts.
func TestInputMessagesFollowTheConventionsShape(t *testing.T) {
	out := inputMessages([]*heraldpb.ChatMessage{
		{Role: "user", Content: "list files"},
		{Role: "assistant", Reasoning: "use a tool", ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "terminal", Arguments: `{"command":"ls"}`}}},
		{Role: "tool", ToolCallId: "c1", Content: "a.txt"},
	})
	var msgs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &msgs))
	require.Equal(t, []map[string]any{
		{"role": "user", "parts": []any{map[string]any{"type": "text", "content": "list files"}}},
		{"role": "assistant", "parts": []any{map[string]any{"type": "reasoning", "content": "use a tool"},
			map[string]any{"type": "tool_call", "id": "c1", "name": "terminal", "arguments": map[string]any{"command": "ls"}}}},
		{"role": "tool", "parts": []any{map[string]any{"type": "tool_call_response", "id": "c1", "response": "a.txt"}}},
	}, msgs)
}
