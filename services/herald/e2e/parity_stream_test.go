package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// chatStream is a raw Chat Completions SSE stream of the given deltas,
// then a finish chunk and [DONE].
func chatStream(finish string, deltas ...map[string]any) string {
	var b strings.Builder
	chunk := func(delta map[string]any, fin any) {
		data, _ := json.Marshal(map[string]any{"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 1,
			"model": "test-model", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}})
		fmt.Fprintf(&b, "data: %s\n\n", data)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, d := range deltas {
		chunk(d, nil)
	}
	chunk(map[string]any{}, finish)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

func toolDelta(index int, id, name, args string) map[string]any {
	call := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		call["id"], call["type"] = id, "function"
		call["function"].(map[string]any)["name"] = name
	}
	return map[string]any{"tool_calls": []any{call}}
}

// §18 RA::TestStreamingApiCall::test_ollama_reused_index_separate_tool_calls:
// Ollama streams every tool call at index 0, each with its own id; each id
// is a call of its own.
func TestParityStreamedCallsReusingAnIndexStayApart(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Reply{Raw: chatStream("tool_calls",
			toolDelta(0, "call_a", "read_file", `{"path":"a.txt"}`),
			toolDelta(0, "call_b", "read_file", `{"path":"b.txt"}`),
		)},
		scripted.Text("read both"),
	))
	require.NoError(t, writeWorkspaceFile(h, "a.txt", "alpha"))
	require.NoError(t, writeWorkspaceFile(h, "b.txt", "beta"))
	task := NewTask("read a and b, Ollama style")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	results := toolContents(h.Transcript(task.SessionID))
	require.Len(t, results, 2)
	require.Contains(t, results[0], "alpha")
	require.Contains(t, results[1], "beta")
}

// The usual shape still assembles: calls at their own indexes, arguments
// split over deltas that carry no id.
func TestParityStreamedCallsSplitOverDeltasAssemble(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Reply{Raw: chatStream("tool_calls",
			toolDelta(0, "call_a", "read_file", `{"pa`),
			toolDelta(1, "call_b", "read_file", `{"path":`),
			toolDelta(0, "", "", `th":"a.txt"}`),
			toolDelta(1, "", "", `"b.txt"}`),
		)},
		scripted.Text("read both"),
	))
	require.NoError(t, writeWorkspaceFile(h, "a.txt", "alpha"))
	require.NoError(t, writeWorkspaceFile(h, "b.txt", "beta"))
	task := NewTask("read a and b, split deltas")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	results := toolContents(h.Transcript(task.SessionID))
	require.Len(t, results, 2)
	require.Contains(t, results[0], "alpha")
	require.Contains(t, results[1], "beta")
}

// §4 RA::TestRetryExhaustion::test_content_filter_refusal_surfaced_not_retried:
// OpenAI's message.refusal with no content, finish stop, is a refusal:
// one request, the turn fails with the model's words.
func TestParityOpenAIRefusalFieldIsARefusal(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Reply{Raw: chatStream("stop",
		map[string]any{"refusal": "I won't help "}, map[string]any{"refusal": "with that."})}))
	task := NewTask("something refused")
	res := h.Run(task)
	require.Equal(t, proto.ExitFailed, res.ExitReason)
	require.Len(t, convo(h, task.Prompt), 1, "a refusal is not asked again")
	require.Contains(t, res.FinalResponse, "I won't help with that.")
	require.Contains(t, res.Error, "content_policy")
}
