package loop

import (
	"strings"
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// The reasoning records sent back with a message (signed thinking blocks,
// encrypted reasoning) are part of the next prompt, so the context estimate
// that decides compression counts them; and merging two assistant messages
// keeps both messages' records.
func TestReasoningSentBackCountsInTheContextEstimate(t *testing.T) {
	plain := &heraldpb.ChatMessage{Role: "assistant", Content: "ok", ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "read_file"}}}
	signed := &heraldpb.ChatMessage{Role: "assistant", Content: "ok", ToolCalls: plain.ToolCalls,
		ReasoningItems: []*heraldpb.ReasoningItem{{ApiMode: "codex_responses", Json: `{"encrypted_content":"` + strings.Repeat("A", 4000) + `"}`}}}
	require.Greater(t, historyChars([]*heraldpb.ChatMessage{signed}), historyChars([]*heraldpb.ChatMessage{plain})+4000)

	first := &heraldpb.ChatMessage{Role: "assistant", Content: "a",
		ReasoningItems: []*heraldpb.ReasoningItem{{ApiMode: "anthropic_messages", Json: `{"type":"thinking","signature":"s1"}`}}}
	second := &heraldpb.ChatMessage{Role: "assistant", Content: "b",
		ReasoningItems: []*heraldpb.ReasoningItem{{ApiMode: "anthropic_messages", Json: `{"type":"thinking","signature":"s2"}`}}}
	merged := mergeAdjacentUsers([]*heraldpb.ChatMessage{first, second})
	require.Len(t, merged, 1)
	require.Len(t, merged[0].GetReasoningItems(), 2)
	require.Len(t, first.GetReasoningItems(), 1, "the history's own message is not changed")
}
