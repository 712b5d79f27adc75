package gateway

import (
	"encoding/json"
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// TestUsageIsNormalisedByEachProvidersConvention feeds usage blocks as each
// provider reports them; every token lands in exactly one class and the
// classes add up to the prompt the provider reported.
func TestUsageIsNormalisedByEachProvidersConvention(t *testing.T) {
	cases := []struct {
		name string
		body string
		want *heraldpb.Usage
	}{
		{"openai cached and reasoning", `{"prompt_tokens":1000,"completion_tokens":300,"total_tokens":1300,
			"prompt_tokens_details":{"cached_tokens":800},"completion_tokens_details":{"reasoning_tokens":200}}`,
			&heraldpb.Usage{InputTokens: 200, CacheReadTokens: 800, OutputTokens: 300, ReasoningTokens: 200}},
		{"openrouter anthropic with cache writes", `{"prompt_tokens":1000,"completion_tokens":10,"total_tokens":1010,
			"prompt_tokens_details":{"cached_tokens":500,"cache_write_tokens":400}}`,
			&heraldpb.Usage{InputTokens: 100, CacheReadTokens: 500, CacheWriteTokens: 400, OutputTokens: 10}},
		{"deepseek cache hits", `{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,
			"prompt_cache_hit_tokens":600,"prompt_cache_miss_tokens":400,"completion_tokens_details":{"reasoning_tokens":20}}`,
			&heraldpb.Usage{InputTokens: 400, CacheReadTokens: 600, OutputTokens: 50, ReasoningTokens: 20}},
		{"local server without details", `{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`,
			&heraldpb.Usage{InputTokens: 12, OutputTokens: 3}},
	}
	for _, tc := range cases {
		var u chatWireUsage
		require.NoError(t, json.Unmarshal([]byte(tc.body), &u), tc.name)
		got, prompt := builtinProfiles["generic"].normalise(u)
		require.Equal(t, u.PromptTokens, prompt)
		require.Equal(t, tc.want, stripUsage(got), tc.name)
		require.Equal(t, u.PromptTokens, got.GetInputTokens()+got.GetCacheReadTokens()+got.GetCacheWriteTokens(), tc.name)
	}
}

func TestCachedTokensArePricedAtTheCacheRateNotTwice(t *testing.T) {
	p := NewPricer(nil)
	// gpt-4o-mini: $0.15 input, $0.075 cached, $0.60 output per million
	nano, src := p.CostNano("gpt-4o-mini", &heraldpb.Usage{InputTokens: 200_000, CacheReadTokens: 800_000, OutputTokens: 100_000, ReasoningTokens: 50_000})
	require.Equal(t, PriceBuiltin, src)
	require.Equal(t, uint64(30_000_000+60_000_000+60_000_000), nano, "reasoning is inside output and not billed again")
}

// xAI's recorded grok-4 call (cheesuschris/Carbon0 demo/test_xAI.md): 703
// prompt tokens (679 cached), 4 completion and 250 reasoning tokens beside
// them. With the built-in price the cost is xAI's own rule: reasoning at
// the output price, cached input at the cache rate.
func TestXAIReasoningIsBilledAtTheOutputPriceByDefault(t *testing.T) {
	var u chatWireUsage
	require.NoError(t, json.Unmarshal([]byte(`{"prompt_tokens":703,"completion_tokens":4,"total_tokens":957,
		"prompt_tokens_details":{"cached_tokens":679},"completion_tokens_details":{"reasoning_tokens":250}}`), &u))
	usage, _ := builtinProfiles["xai"].normalise(u)
	require.Equal(t, &heraldpb.Usage{InputTokens: 24, CacheReadTokens: 679, OutputTokens: 254, ReasoningTokens: 250}, stripUsage(usage))
	nano, src := NewPricer(nil).CostNano("grok-4-0709", usage)
	require.Equal(t, PriceBuiltin, src)
	// 24 × $3 + 679 × $0.75 + 254 × $15 per million tokens
	require.Equal(t, uint64(72_000+509_250+3_810_000), nano)
	fast, _ := NewPricer(nil).Lookup("grok-4-fast-reasoning")
	require.Equal(t, 0.20, fast.Input, "the fast family is not priced as grok-4")
}
