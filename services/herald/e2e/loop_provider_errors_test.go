package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// testKey is the primary's API key in these sessions; no result may show it.
const testKey = "sk-test-9f8e7d6c5b4a39281706"

// TestLoopProviderErrorsEndWithTheTruth drives whole sessions against
// provider refusals and failures (bodies as each provider sends them) and
// checks the exit reason, the message the user reads, and how many
// requests were really made: a refused request ends `failed` after one
// attempt with the provider's own words, `all_retries_exhausted` only
// follows real retries.
func TestLoopProviderErrorsEndWithTheTruth(t *testing.T) {
	cases := []struct {
		name     string
		reply    scripted.Reply
		reason   string
		requests int
		says     string
	}{
		// source: OpenAI's answer to max_tokens on a reasoning model (teilomillet/gollm#33, griptape-ai/ComfyUI-Griptape#312)
		{name: "openai unsupported parameter", reason: proto.ExitFailed, requests: 1, says: "Use 'max_completion_tokens' instead",
			reply: scripted.Reply{Status: 400, Body: `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`}},
		// source: Groq's tool_use_failed with its failed_generation (agno-agi/agno#4090, sipeed/picoclaw#748)
		{name: "groq tool_use_failed", reason: proto.ExitFailed, requests: 1, says: "Failed to call a function",
			reply: scripted.Reply{Status: 400, Body: `{"error":{"message":"Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.","type":"invalid_request_error","code":"tool_use_failed","failed_generation":"<function=terminal>{\"command\": \"ls\"</function>"}}`}},
		// source: Mistral's 422 to stream_options (avante-corp/avante.nvim#2347)
		{name: "mistral extra_forbidden", reason: proto.ExitFailed, requests: 1, says: "body.stream_options.include_usage: Extra inputs are not permitted",
			reply: scripted.Reply{Status: 422, Body: `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options","include_usage"],"msg":"Extra inputs are not permitted","input":true}]},"type":"invalid_request_error","param":null,"code":null}`}},
		// source: Groq's 400 to reasoning_content echoed back (NousResearch/hermes-agent#11089)
		{name: "groq reasoning_content refused", reason: proto.ExitFailed, requests: 1, says: "property 'reasoning_content' is unsupported",
			reply: scripted.Reply{Status: 400, Body: `{"error":{"message":"'messages.2' : for 'role:assistant' the following must be satisfied[('messages.2' : property 'reasoning_content' is unsupported)]","type":"invalid_request_error"}}`}},
		// a proxy that echoes the request's credential in its refusal: the key is redacted
		{name: "refusal quoting the key", reason: proto.ExitFailed, requests: 1, says: "Bearer [redacted]",
			reply: scripted.Reply{Status: 400, Body: `{"error":{"message":"header Authorization: Bearer ` + testKey + ` is malformed"}}`}},
		{name: "model not found", reason: proto.ExitFailed, requests: 1, says: "does not exist",
			reply: scripted.Reply{Status: 404, Body: `{"error":{"message":"The model 'test-model' does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}`}},
		{name: "no credit", reason: proto.ExitFailed, requests: 1, says: "insufficient credits",
			reply: scripted.Reply{Status: 402, Body: `{"error":{"message":"Your account or API key has insufficient credits. Add more credits and retry the request.","code":402}}`}},
		{name: "content policy", reason: proto.ExitFailed, requests: 1, says: "safety system",
			reply: scripted.Reply{Status: 400, Body: `{"error":{"message":"Your request was rejected as a result of our safety system.","code":"content_policy_violation"}}`}},
		// source: Gemini answers a bad key with 400 INVALID_ARGUMENT / API_KEY_INVALID (ai.google.dev/gemini-api/docs/troubleshooting)
		{name: "gemini bad key is auth", reason: proto.ExitAuthFailed, requests: 1, says: "API key not valid",
			reply: scripted.Reply{Status: 400, Body: `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]`}},
		{name: "bad key", reason: proto.ExitAuthFailed, requests: 1, says: "Incorrect API key",
			reply: scripted.Reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided: ` + testKey + `."}}`}},
		{name: "server errors are retried", reason: proto.ExitAllRetriesExhausted, requests: 3, says: "(after 3 attempts)",
			reply: scripted.Reply{Status: 500, Body: `{"error":{"message":"The server had an error while processing your request."}}`}},
		{name: "rate limits are retried", reason: proto.ExitAllRetriesExhausted, requests: 3, says: "Rate limit reached",
			reply: scripted.Reply{Status: 429, Body: `{"error":{"message":"Rate limit reached for requests","type":"requests"}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Start(t, scripted.Conversation(tc.reply), withConfig(func(c *config.Config) { c.Primary.APIKey = testKey }))
			task := NewTask("please answer")
			res := h.Run(task)
			require.Equal(t, tc.reason, res.ExitReason, "error: %s", res.Error)
			require.Contains(t, res.Error, tc.says, "the provider's own words reach the user")
			require.NotContains(t, res.Error, testKey)
			require.Len(t, convo(h, task.Prompt), tc.requests)
			for _, ev := range h.Events(task.SessionID) {
				require.NotContains(t, ev.Message, testKey)
			}
		})
	}
}

// A request the primary refuses is still worth one try on the fallback,
// whose answer then ends the turn normally.
func TestLoopRefusedRequestFallsBack(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if r.Model == "backup-model" {
			return scripted.Text("answered by the fallback")
		}
		return scripted.Reply{Status: 400, Body: `{"error":{"message":"Unsupported parameter: 'tools'","type":"invalid_request_error"}}`}
	}, withConfig(func(c *config.Config) {
		c.FallbackProviders = []config.Provider{{Provider: "openai", Model: "backup-model", BaseURL: c.Primary.BaseURL}}
	}))
	task := NewTask("answer me")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "answered by the fallback", res.FinalResponse)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 2, "one refused attempt, not retried, then the fallback")
	require.Equal(t, "test-model", reqs[0].Model)
	require.Equal(t, "backup-model", reqs[1].Model)
}

// A provider whose streaming breaks tool calls is set to `stream: false`:
// every call of the session asks for whole answers, the tool round works,
// and the user still sees the answer text as a delta.
func TestLoopProviderWithStreamingOffStillShowsTheAnswer(t *testing.T) {
	off := false
	h := Start(t, scripted.Conversation(
		scripted.Reply{Content: "Reading the notes.", ToolCalls: []scripted.Call{{ID: "call_n1", Name: "read_file", Args: `{"path":"notes.txt"}`}}},
		scripted.Text("The notes say: buy green tea."),
	), withConfig(func(c *config.Config) {
		c.Providers = map[string]config.ProviderProfile{"openai": {Stream: &off}}
	}))
	require.NoError(t, writeWorkspaceFile(h, "notes.txt", "buy green tea\n"))
	task := NewTask("what do the notes say")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "The notes say: buy green tea.", res.FinalResponse)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.False(t, r.Stream, "asked whole")
	}
	require.Equal(t, "tool", reqs[1].Messages[len(reqs[1].Messages)-1].Role)
	require.Contains(t, reqs[1].Messages[len(reqs[1].Messages)-1].Text(), "buy green tea")
	var shown string
	require.Eventually(t, func() bool {
		shown = ""
		for _, ev := range h.EventsOfType(task.SessionID, proto.EventDelta) {
			shown += ev.Delta
		}
		return strings.Contains(shown, "The notes say: buy green tea.")
	}, 5*time.Second, 10*time.Millisecond, "the answer reaches the user as a delta: %q", shown)
}
