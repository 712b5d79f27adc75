package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// FuzzLLMRequest decodes herald.llm.request.<sid> payloads as handle does:
// garbage is a Permanent error (dead-lettered with its reason), a request
// that passes validateRequest converts to both provider wire formats
// (OpenAI chat and Anthropic messages) without panicking, and the bodies
// it produces are valid JSON. Seeds: testdata/fuzz/FuzzLLMRequest.
func FuzzLLMRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &heraldpb.LLMRequest{}
		if err := bus.Decode(data, req); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		if err := validateRequest(req); err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		call := modelCall{model: req.GetModel() + "-claude", messages: req.GetMessages(), tools: req.GetTools(), maxOut: int64(req.GetMaxOutputTokens())}
		wire := chatMessagesToWire(call.messages, EchoReasoningContent, cacheMarks(call))
		require.Len(t, wire, len(call.messages))
		_, err := json.Marshal(wire)
		require.NoError(t, err)
		_, err = json.Marshal(chatToolsToWire(call.tools))
		require.NoError(t, err)
		body, err := json.Marshal(anthropicBody(call))
		require.NoError(t, err)
		require.True(t, json.Valid(body))
	})
}

// FuzzAnthropicStream feeds arbitrary server-sent events to the Anthropic
// stream reader: a broken stream is an error the gateway classifies, never
// a panic. Seeds: f.Add below.
func FuzzAnthropicStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"c1\",\"name\":\"t\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"data: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"error\",\"error\":{\"message\":\"overloaded\"}}\n\n"))
	f.Add([]byte("data: not json\n\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var deltas int
		ans, err := readAnthropicStream(bytes.NewReader(data), func(string) { deltas++ })
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, ans.message)
	})
}

// FuzzProviderMessage feeds arbitrary provider error bodies to the text the
// gateway shows a person: never empty, never longer than the limit plus an
// ellipsis and an HTML note. Seeds: f.Add below.
func FuzzProviderMessage(f *testing.F) {
	for _, s := range []string{``, `{"error":{"message":"bad key"}}`, `{"error":"nope"}`, `{"message":"m"}`, `{"detail":"d"}`,
		`<html><title>502 Bad Gateway</title></html>`, `{"error":null}`, "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		msg := providerMessage(body)
		require.NotEmpty(t, msg)
		require.LessOrEqual(t, len(msg), maxProviderMessageLen+512)
		_ = statusClass(400, body)
		_ = statusClass(429, body)
	})
}

// FuzzChatStreamChunk feeds arbitrary chunk payloads to the chat decoder
// under every built-in profile: a broken chunk is an error, never a panic,
// and whatever is assembled is a well-formed message. Seeds: f.Add below.
func FuzzChatStreamChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"<th"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"x"}]},{"type":"text","text":"y"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":9}}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":3,"id":"","function":{"name":"f","arguments":"{"}}]}}],"x_groq":{"usage":{"prompt_tokens":1}}}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":-1,"function":{"arguments":"}"}}]},"finish_reason":"error"}],"error":{"code":502,"message":"m"}}`,
		`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":9}}}`,
		`[DONE]`, `not json`, `{"choices":[{"delta":{"reasoning":7,"reasoning_content":"r"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range profileNames() {
			p := builtinProfiles[name]
			d := newChatDecoder(p, modelCall{stream: true, onDelta: func(string) {}})
			if err := d.chunk(data); err != nil {
				require.NotEmpty(t, err.Error())
				continue
			}
			ans, err := d.finish()
			if err != nil {
				continue
			}
			require.NotNil(t, ans.message)
			for _, tc := range ans.message.GetToolCalls() {
				require.NotNil(t, tc)
			}
			require.GreaterOrEqual(t, ans.usage.GetInputTokens(), int64(0))
		}
	})
}
