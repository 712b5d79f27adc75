package gateway

import (
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/stretchr/testify/require"
)

func TestProfileIsChosenFromNameThenHostThenPort(t *testing.T) {
	cases := []struct{ name, base, want string }{
		{"groq", "", "groq"},
		{"GROQ", "https://proxy.example.com/v1", "groq"},
		{"", "https://api.groq.com/openai/v1", "groq"},
		{"custom", "https://api.mistral.ai/v1", "mistral"},
		{"", "https://myres.openai.azure.com/openai/v1", "azure"},
		{"azure-openai", "https://gw.example.com", "azure"},
		{"google", "", "gemini"},
		{"", "https://generativelanguage.googleapis.com/v1beta/openai", "gemini"},
		{"x-ai", "", "xai"},
		{"", "https://api.x.ai/v1", "xai"},
		{"", "https://openrouter.ai/api/v1", "openrouter"},
		{"", "https://api.deepseek.com", "deepseek"},
		{"", "https://api.together.xyz/v1", "together"},
		{"", "https://api.fireworks.ai/inference/v1", "fireworks"},
		{"", "https://api.anthropic.com", "anthropic"},
		{"codex", "", "openai"},
		{"openai", "", "openai"},
		{"openai", "https://api.openai.com/v1", "openai"},
		{"openai", "http://127.0.0.1:11434/v1", "ollama"},
		{"openai", "https://api.groq.com/openai/v1", "groq"},
		{"local", "http://127.0.0.1:11434/v1", "ollama"},
		{"", "http://localhost:8000/v1", "vllm"},
		{"", "http://127.0.0.1:8080/v1", "llamacpp"},
		{"", "http://localhost:1234/v1", "lmstudio"},
		{"llama.cpp", "http://10.0.0.5:9000/v1", "llamacpp"},
		{"local", "http://127.0.0.1:43210/v1", "generic"},
		{"", "https://llm.internal.example.com/v1", "generic"},
	}
	for _, tc := range cases {
		p, err := profileFor(strings.ToLower(tc.name), tc.base, nil)
		require.NoError(t, err)
		require.Equal(t, tc.want, p.Name, "%+v", tc)
	}
	for _, name := range []string{"openai", "azure", "anthropic", "openrouter", "groq", "xai", "deepseek", "mistral",
		"gemini", "together", "fireworks", "ollama", "vllm", "llamacpp", "lmstudio"} {
		require.Contains(t, builtinProfiles, name, "issue 12's providers each have a profile")
	}
}

func TestProfileOverridesFromHeraldYAML(t *testing.T) {
	no, yes := false, true
	overrides := map[string]config.ProviderProfile{
		"my-gateway": {Profile: "groq", Stream: &no, MaxTokensField: FieldMaxCompletionTokens,
			ReasoningEcho: EchoReasoning, Usage: "delta", ReasoningTokens: "separate", ThinkTags: &yes,
			OutputCaps: map[string]int64{"Big-Model": 1000}},
		"mistral": {StreamOptions: &yes, ReasoningEcho: EchoNone},
		"gw2":     {Profile: "Google"},
	}
	p, err := profileFor("my-gateway", "https://gw.example.com/v1", overrides)
	require.NoError(t, err)
	require.Equal(t, "groq", p.Name)
	require.False(t, p.Stream)
	require.Equal(t, FieldMaxCompletionTokens, p.MaxTokensField)
	require.Equal(t, EchoReasoning, p.ReasoningEcho)
	require.Equal(t, UsageDelta, p.Usage)
	require.Equal(t, ReasoningSeparate, p.ReasoningTokens)
	require.True(t, p.ThinkTags)
	require.Equal(t, int64(1000), p.outputLimit("vendor/big-model-2", 5000, 0), "caps match case-insensitively, vendor prefix dropped")
	require.Equal(t, int64(0), p.outputLimit("small-model", 0, 0), "no limit asked, none sent")

	g, err := profileFor("gw2", "https://gw.example.com", overrides)
	require.NoError(t, err)
	require.Equal(t, "gemini", g.Name, "profile names take the same aliases")

	m, err := profileFor("mistral", "", overrides)
	require.NoError(t, err)
	require.True(t, m.StreamOptions, "one field changed")
	require.Equal(t, "", m.ReasoningEcho, "none sends no reasoning")
	require.Equal(t, builtinProfiles["mistral"].Usage, m.Usage, "the rest is the built-in profile's")
	require.Equal(t, int64(4096), builtinProfiles["anthropic"].outputLimit("claude-3-opus-20240229", 0, defaultMaxTokens))
	require.Equal(t, int64(2000), builtinProfiles["anthropic"].outputLimit("claude-3-haiku-20240307", 2000, defaultMaxTokens))
	require.Equal(t, int64(defaultMaxTokens), builtinProfiles["anthropic"].outputLimit("claude-sonnet-4-5", 0, defaultMaxTokens))
}

func TestBadProfileOverridesFailAtStartUp(t *testing.T) {
	cfg := Config{Primary: config.Provider{Provider: "groq", Model: "m"}, Profiles: map[string]config.ProviderProfile{
		"groq": {Profile: "grok-ish", Usage: "sometimes"}}}
	err := cfg.Validate()
	require.ErrorContains(t, err, `providers.groq.profile "grok-ish" is not a known profile`)
	cfg.Profiles["groq"] = config.ProviderProfile{Usage: "sometimes", ReasoningEcho: "thoughts", MaxTokensField: "limit", ToolCallIDs: "short"}
	err = cfg.Validate()
	require.ErrorContains(t, err, "providers.groq.usage must be one of cumulative, delta")
	require.ErrorContains(t, err, "providers.groq.reasoning_echo must be one of none, reasoning_content, reasoning")
	require.ErrorContains(t, err, "providers.groq.max_tokens_field must be one of max_tokens, max_completion_tokens")
	require.ErrorContains(t, err, "providers.groq.tool_call_ids must be one of any, alnum9")
}

// Every place a tag can be cut between two chunks gives the same answer
// and reasoning, and no byte of a tag reaches the streamed answer.
func TestThinkTagsSplitAnywhereAcrossChunks(t *testing.T) {
	whole := "<think>\nweigh a < b and </ not-a-tag\n</think>\n\nThe answer is <b>42</b>."
	for cut := 0; cut <= len(whole); cut++ {
		for cut2 := cut; cut2 <= len(whole); cut2++ {
			var s thinkSplitter
			var text, reasoning strings.Builder
			for _, part := range []string{whole[:cut], whole[cut:cut2], whole[cut2:]} {
				a, r := s.feed(part)
				text.WriteString(a)
				reasoning.WriteString(r)
			}
			a, r := s.flush()
			text.WriteString(a)
			reasoning.WriteString(r)
			require.Equal(t, "The answer is <b>42</b>.", text.String(), "cuts at %d, %d", cut, cut2)
			require.Equal(t, "weigh a < b and </ not-a-tag\n", reasoning.String(), "cuts at %d, %d", cut, cut2)
		}
	}
}
