package gateway

import (
	"encoding/json"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func sentFields(t *testing.T, raw []byte) map[string]json.RawMessage {
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &body))
	return body
}

// A request whose history ends in a tool round answered by an assistant
// turn without a thinking block (written before thinking was asked for, or
// by another provider) is sent without thinking: Anthropic refuses thinking
// there ("a final assistant message must start with a thinking block").
// Once the turn has its block, thinking is asked again.
func TestThinkingLeftOutAfterAToolRoundWithoutItsBlock(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), func(c *Config) {
		c.Primary = config.Provider{Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: c.Primary.BaseURL,
			APIMode: ModeAnthropicMessages}
	})
	round := func(items []*heraldpb.ReasoningItem) *heraldpb.LLMRequest {
		req := r.request("think", "read it")
		req.Reasoning = &heraldpb.Reasoning{Effort: "medium"}
		req.Tools = []*heraldpb.ToolSpec{{Name: "read_file", ParametersJson: `{"type":"object"}`}}
		req.Messages = append(req.Messages,
			&heraldpb.ChatMessage{Role: "assistant", ReasoningItems: items,
				ToolCalls: []*heraldpb.ToolCall{{Id: "toolu_1", Name: "read_file", Arguments: `{}`}}},
			&heraldpb.ChatMessage{Role: "tool", ToolCallId: "toolu_1", Content: "tea"})
		return req
	}
	require.Empty(t, r.call(round(nil)).GetError())
	first := r.model.Requests()[0]
	require.NotContains(t, sentFields(t, first.Raw), "thinking")
	require.Empty(t, first.Header.Get("Anthropic-Beta"))
	require.Equal(t, "8192", string(sentFields(t, first.Raw)["max_tokens"]), "no budget to make room for")

	signed := []*heraldpb.ReasoningItem{{ApiMode: ModeAnthropicMessages, Json: `{"type":"thinking","thinking":"t","signature":"sig"}`}}
	require.Empty(t, r.call(round(signed)).GetError())
	second := r.model.Requests()[1]
	require.JSONEq(t, `{"type":"enabled","budget_tokens":8192}`, string(sentFields(t, second.Raw)["thinking"]))
	require.Equal(t, interleavedThinkingBeta, second.Header.Get("Anthropic-Beta"))

	// records of another API mode never reach Anthropic
	other := []*heraldpb.ReasoningItem{{ApiMode: ModeCodexResponses, Json: `{"type":"reasoning","encrypted_content":"x"}`}}
	require.Empty(t, r.call(round(other)).GetError())
	third := r.model.Requests()[2]
	require.NotContains(t, sentFields(t, third.Raw), "thinking")
	require.NotContains(t, string(third.Raw), "encrypted_content")
}

// herald.yaml's reasoning applies per model, and a request's effort (a
// task's reasoning_effort) replaces it; "off" sends nothing.
func TestConfiguredReasoningPerModelAndTheTaskOverride(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), func(c *Config) {
		c.Primary = config.Provider{Provider: "openai", Model: "gpt-5-mini", BaseURL: c.Primary.BaseURL, APIKey: "sk-test"}
		c.Profiles = map[string]config.ProviderProfile{"openai": {Profile: "openai"}}
		c.Reasoning = config.Reasoning{ReasoningSettings: config.ReasoningSettings{Effort: "low"},
			PerModel: map[string]config.ReasoningSettings{"gpt-5": {Effort: "medium"}, "o3": {Effort: "high"}}}
	})
	for _, tc := range []struct {
		ask  *heraldpb.Reasoning
		want string
	}{
		{nil, `"medium"`},
		{&heraldpb.Reasoning{Effort: "minimal"}, `"minimal"`},
		{&heraldpb.Reasoning{Effort: "off"}, ""},
	} {
		req := r.request("cfg", "hello")
		req.Reasoning = tc.ask
		require.Empty(t, r.call(req).GetError())
		reqs := r.model.Requests()
		got := sentFields(t, reqs[len(reqs)-1].Raw)["reasoning_effort"]
		require.Equal(t, tc.want, string(got), "ask %v", tc.ask)
	}
}

func TestResolveReasoning(t *testing.T) {
	cfg := config.Reasoning{ReasoningSettings: config.ReasoningSettings{Effort: "low", Summary: "none"},
		PerModel: map[string]config.ReasoningSettings{"claude": {BudgetTokens: 30000}}}
	require.Equal(t, reasoningAsk{effort: "low", budget: 30000, summary: "none"}, resolveReasoning(cfg, "claude-opus-4-1", nil))
	require.Equal(t, int64(30000), resolveReasoning(cfg, "claude-opus-4-1", nil).anthropicBudget(), "budget_tokens wins over effort")
	high := resolveReasoning(cfg, "claude-opus-4-1", &heraldpb.Reasoning{Effort: "high"})
	require.Equal(t, int64(16384), high.anthropicBudget(), "a task's effort replaces the configured budget")
	require.False(t, resolveReasoning(cfg, "gpt-5", &heraldpb.Reasoning{Effort: "off"}).on())
	require.False(t, resolveReasoning(config.Reasoning{}, "gpt-5", nil).on(), "nothing configured: nothing asked")
}
