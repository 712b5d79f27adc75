package gateway

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestAPIModeResolutionOrder(t *testing.T) {
	cases := []struct {
		p    config.Provider
		want string
	}{
		{config.Provider{Provider: "anthropic", APIMode: ModeChatCompletions}, ModeChatCompletions},
		{config.Provider{Provider: "openrouter", APIMode: ModeCodexResponses}, ModeCodexResponses},
		{config.Provider{Provider: "anthropic", BaseURL: "https://proxy.example.com/v1"}, ModeAnthropicMessages},
		{config.Provider{Provider: "codex"}, ModeCodexResponses},
		{config.Provider{Provider: "openai-codex"}, ModeCodexResponses},
		{config.Provider{Provider: "custom", BaseURL: "https://api.anthropic.com"}, ModeAnthropicMessages},
		{config.Provider{BaseURL: "https://gateway.example.com/llm/anthropic/"}, ModeAnthropicMessages},
		{config.Provider{Provider: "openai", BaseURL: "https://api.openai.com/v1"}, ModeChatCompletions},
		{config.Provider{Provider: "ollama", BaseURL: "http://127.0.0.1:11434/v1"}, ModeChatCompletions},
		{config.Provider{}, ModeChatCompletions},
	}
	for _, tc := range cases {
		got, err := resolveAPIMode(tc.p)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc.p)
	}
	_, err := resolveAPIMode(config.Provider{Provider: "x", APIMode: "completions_v0"})
	require.ErrorContains(t, err, `api_mode "completions_v0"`)
	require.Error(t, Config{Primary: config.Provider{Model: "m", APIMode: "bogus"}}.Validate())
}

func TestLocalEndpointsAreRecognised(t *testing.T) {
	for _, u := range []string{"http://localhost:11434/v1", "http://127.0.0.1:8000/v1", "http://0.0.0.0:8000", "http://[::1]:8000/v1"} {
		require.True(t, isLocal(u), u)
	}
	for _, u := range []string{"https://api.openai.com/v1", "http://10.0.0.5:8000/v1", "not a url"} {
		require.False(t, isLocal(u), u)
	}
}

// history is a conversation one tool round in: every mode must carry the
// system prompt, the assistant's tool call and the tool's result.
func history(r *rig, sid string) *heraldpb.LLMRequest {
	req := r.request(sid, "List the files")
	req.Messages = append(req.Messages,
		&heraldpb.ChatMessage{Role: "assistant", Content: "Let me look.", ToolCalls: []*heraldpb.ToolCall{{Id: "call_a", Name: "terminal", Arguments: `{"command":"ls"}`}}},
		&heraldpb.ChatMessage{Role: "tool", ToolCallId: "call_a", Name: "terminal", Content: "a.txt\nb.txt"},
	)
	req.Tools = []*heraldpb.ToolSpec{{Name: "read_file", Description: "Read a file",
		ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`}}
	return req
}

func TestEveryAPIModeConvertsBothWaysOverHTTP(t *testing.T) {
	reply := scripted.Reply{Content: "Two files; reading a.txt.", Reasoning: "a.txt first.", ChunkChars: 4,
		ToolCalls: []scripted.Call{{ID: "call_b", Name: "read_file", Args: `{"path":"a.txt"}`},
			{ID: "call_c", Name: "read_file", Args: `{"path":"b.txt"}`}},
		Usage: &scripted.Usage{PromptTokens: 500, CompletionTokens: 40, CachedTokens: 200, ReasoningTokens: 10}}
	for _, mode := range []string{ModeChatCompletions, ModeCodexResponses, ModeAnthropicMessages} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", mode, stream), func(t *testing.T) {
				r := newRig(t, scripted.Conversation(scripted.Text("unused"), reply), func(c *Config) { c.Primary.APIMode = mode })
				ev := r.watch("c1")
				req := history(r, "c1")
				req.Stream = stream
				resp := r.call(req)

				require.Empty(t, resp.GetError())
				require.Equal(t, mode, resp.GetApiMode())
				msg := resp.GetMessage()
				require.Equal(t, "Two files; reading a.txt.", msg.GetContent())
				require.Equal(t, "a.txt first.", msg.GetReasoning())
				require.Equal(t, "tool_calls", resp.GetFinishReason())
				require.Len(t, msg.GetToolCalls(), 2, "parallel tool calls")
				require.Equal(t, "call_b", msg.GetToolCalls()[0].GetId())
				require.Equal(t, "read_file", msg.GetToolCalls()[0].GetName())
				require.JSONEq(t, `{"path":"a.txt"}`, msg.GetToolCalls()[0].GetArguments())
				require.Equal(t, "call_c", msg.GetToolCalls()[1].GetId())
				require.JSONEq(t, `{"path":"b.txt"}`, msg.GetToolCalls()[1].GetArguments())
				require.Equal(t, int64(500), resp.GetPromptTokens())
				require.Equal(t, int64(300), resp.GetUsage().GetInputTokens())
				require.Equal(t, int64(200), resp.GetUsage().GetCacheReadTokens())
				require.Equal(t, int64(40), resp.GetUsage().GetOutputTokens())
				if stream {
					require.Eventually(t, func() bool { return ev.text() == msg.GetContent() }, 5*time.Second, 5*time.Millisecond)
				}

				got := r.model.Requests()[0]
				require.Equal(t, "m1", got.Model)
				require.Equal(t, stream, got.Stream)
				require.Len(t, got.Messages, 4, "system, user, assistant with call, tool result")
				require.Equal(t, "system", got.Messages[0].Role)
				require.Equal(t, "You are terse.", got.Messages[0].Text())
				require.Equal(t, "List the files", got.Messages[1].Text())
				require.Equal(t, "assistant", got.Messages[2].Role)
				require.Equal(t, "Let me look.", got.Messages[2].Text())
				require.Equal(t, "call_a", got.Messages[2].ToolCalls[0].ID)
				require.JSONEq(t, `{"command":"ls"}`, got.Messages[2].ToolCalls[0].Function.Arguments)
				require.Equal(t, "tool", got.Messages[3].Role)
				require.Equal(t, "call_a", got.Messages[3].ToolCallID)
				require.Equal(t, "a.txt\nb.txt", got.Messages[3].Text())
				require.Len(t, got.Tools, 1)
				require.Contains(t, string(got.Tools[0]), "read_file")
			})
		}
	}
}

func TestResponsesModeSendsInstructionsAndDoesNotStore(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), func(c *Config) { c.Primary.APIMode = ModeCodexResponses })
	r.call(r.request("c2", "hi"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.model.Requests()[0].Raw, &body))
	require.Equal(t, "/v1/responses", r.model.Requests()[0].Path)
	require.Equal(t, "You are terse.", body["instructions"])
	require.Equal(t, false, body["store"])
}

func TestAnthropicPromptCachingMarkers(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), func(c *Config) {
		c.Primary = config.Provider{Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: c.Primary.BaseURL, APIKey: "sk-ant-test-key-123456"}
	})
	req := r.request("c3", "first question")
	req.Messages = append(req.Messages,
		&heraldpb.ChatMessage{Role: "assistant", Content: "first answer"},
		&heraldpb.ChatMessage{Role: "user", Content: "second question"},
		&heraldpb.ChatMessage{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "t1", Name: "terminal", Arguments: `{"command":"pwd"}`}}},
		&heraldpb.ChatMessage{Role: "tool", ToolCallId: "t1", Content: "/work"},
		&heraldpb.ChatMessage{Role: "user", Content: "and now?"},
	)
	require.Empty(t, r.call(req).GetError())

	got := r.model.Requests()[0]
	require.Equal(t, "/v1/messages", got.Path)
	require.Equal(t, "sk-ant-test-key-123456", got.Header.Get("X-Api-Key"))
	require.Equal(t, anthropicVersion, got.Header.Get("Anthropic-Version"))
	var body struct {
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(got.Raw, &body))
	require.Equal(t, map[string]any{"type": "ephemeral"}, body.System[len(body.System)-1]["cache_control"])
	// the tool result and the next user question merge into one user turn
	roles := []string{}
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	require.Equal(t, []string{"user", "assistant", "user", "assistant", "user"}, roles)
	markers := 0
	for i, m := range body.Messages {
		for j, b := range m.Content {
			_, marked := b["cache_control"]
			last := j == len(m.Content)-1
			require.Equal(t, i >= len(body.Messages)-3 && last, marked, "message %d block %d", i, j)
			if marked {
				markers++
			}
		}
	}
	require.Equal(t, 3, markers, "the last three non-system messages")
}

func TestAnthropicCacheTokensArePricedByClass(t *testing.T) {
	usage := &scripted.Usage{PromptTokens: 1000, CachedTokens: 600, CacheWriteTokens: 300, CompletionTokens: 100}
	for _, stream := range []bool{false, true} {
		r := newRig(t, scripted.Conversation(scripted.Reply{Content: "cached", Usage: usage}), func(c *Config) {
			c.Primary = config.Provider{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", BaseURL: c.Primary.BaseURL, APIKey: "k"}
		})
		req := r.request("c4", "hello")
		req.Stream = stream
		resp := r.call(req)
		require.Empty(t, resp.GetError())
		require.Equal(t, &heraldpb.Usage{InputTokens: 100, CacheReadTokens: 600, CacheWriteTokens: 300, OutputTokens: 100}, stripUsage(resp.GetUsage()))
		require.Equal(t, int64(1000), resp.GetPromptTokens())
		// 100×$3 + 600×$0.30 + 300×$3.75 + 100×$15 per million
		u := r.usageEvents()
		require.Len(t, u, 1)
		require.Equal(t, uint64(3_105_000), u[0].GetCostNanoUsd())
		require.Equal(t, PriceBuiltin, u[0].GetPriceSource())
		require.Equal(t, ModeAnthropicMessages, u[0].GetApiMode())
	}
}

func TestAnthropicErrorsAreClassified(t *testing.T) {
	overloaded := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	r := newRig(t, scripted.FailFirst(1, scripted.Reply{Status: 529, Body: overloaded},
		scripted.FailFirst(1, scripted.Reply{Raw: "event: error\ndata: " + overloaded + "\n\n"},
			scripted.Conversation(scripted.Text("recovered")))),
		func(c *Config) {
			c.Primary = config.Provider{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: c.Primary.BaseURL, APIKey: "k"}
		})
	ev := r.watch("c5")
	req := r.request("c5", "hello")
	req.Stream = true
	resp := r.call(req)
	require.Equal(t, "recovered", resp.GetMessage().GetContent())
	require.Equal(t, int32(3), resp.GetAttempts())
	require.Eventually(t, func() bool { return len(ev.ofType("retry")) == 2 }, 5*time.Second, 5*time.Millisecond)
	for _, e := range ev.ofType("retry") {
		require.Equal(t, string(ClassOverloaded), e.Status)
	}
}

func TestClaudeThroughARouterGetsCachingMarkers(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), func(c *Config) {
		c.Primary.Model = "anthropic/claude-sonnet-4.5"
		c.Primary.Provider = "openrouter"
		c.Primary.APIKey = "or-key"
	})
	req := r.request("c6", "q1")
	req.Messages = append(req.Messages,
		&heraldpb.ChatMessage{Role: "assistant", Content: "a1"},
		&heraldpb.ChatMessage{Role: "user", Content: "q2"},
		&heraldpb.ChatMessage{Role: "assistant", Content: "a2"},
		&heraldpb.ChatMessage{Role: "user", Content: "q3"},
	)
	require.Empty(t, r.call(req).GetError())
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(r.model.Requests()[0].Raw, &body))
	marked := []string{}
	for _, m := range body.Messages {
		var parts []map[string]any
		if json.Unmarshal(m.Content, &parts) == nil && parts[len(parts)-1]["cache_control"] != nil {
			marked = append(marked, m.Role+":"+parts[0]["text"].(string))
		}
	}
	require.Equal(t, []string{"system:You are terse.", "user:q2", "assistant:a2", "user:q3"}, marked)

	plain := newRig(t, scripted.Conversation(scripted.Text("ok")))
	plain.call(plain.request("c7", "q1"))
	require.NotContains(t, string(plain.model.Requests()[0].Raw), "cache_control", "non-Claude models get no markers")
}
