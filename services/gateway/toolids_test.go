package gateway

import (
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// Mistral refuses ids that are not nine letters and digits ("Tool call id
// was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9":
// karthink/gptel#1203, langchain-ai/langchain#24668). Ids other providers
// or Herald made are mapped, a call and its result alike; Mistral's own
// ids and the caller's history are left as they are.
func TestMistralGetsNineCharacterToolCallIDs(t *testing.T) {
	msgs := []*heraldpb.ChatMessage{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "call_0fypS1hVX", Name: "a"}, {Id: "D681PevKs", Name: "b"}, {Id: "call_1_0", Name: "c"}}},
		{Role: "tool", ToolCallId: "call_0fypS1hVX", Content: "1"},
		{Role: "tool", ToolCallId: "D681PevKs", Content: "2"},
		{Role: "tool", ToolCallId: "call_1_0", Content: "3"},
	}
	got := builtinProfiles["mistral"].toolIDsFor(msgs)
	calls := got[1].GetToolCalls()
	for i, tc := range calls {
		require.Regexp(t, `^[A-Za-z0-9]{9}$`, tc.GetId())
		require.Equal(t, tc.GetId(), got[2+i].GetToolCallId(), "call %d and its result still match", i)
	}
	require.Equal(t, "D681PevKs", calls[1].GetId(), "Mistral's own id unchanged")
	require.NotEqual(t, calls[0].GetId(), calls[2].GetId())
	require.Equal(t, "call_0fypS1hVX", msgs[1].GetToolCalls()[0].GetId(), "the history itself is not changed")
	require.Equal(t, msgs, builtinProfiles["openai"].toolIDsFor(msgs), "other providers get the ids as they are")
}
