package pricing

import "strings"

func f(v float64) *float64 { return &v }

// builtin are list prices in USD per million tokens (standard tier) as
// published by each provider in late 2025. Keys are model-name prefixes;
// the longest matching prefix wins.
var builtin = map[string]Price{
	// OpenAI: cached input is billed at the cache rate; no cache-write charge.
	"gpt-5":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":   {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5-nano":   {Input: 0.05, Output: 0.40, CacheRead: 0.005},
	"gpt-5-pro":    {Input: 15, Output: 120},
	"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.50},
	"gpt-4.1-mini": {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"gpt-4.1-nano": {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"gpt-4o":       {Input: 2.50, Output: 10, CacheRead: 1.25},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"o1":           {Input: 15, Output: 60, CacheRead: 7.50},
	"o1-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.55},
	"o3":           {Input: 2, Output: 8, CacheRead: 0.50},
	"o3-pro":       {Input: 20, Output: 80},
	"o3-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.55},
	"o4-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	// Anthropic: 5-minute cache writes at 1.25× input, cache reads at 0.1×.
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-3-5-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	"claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.30},
	// Google Gemini (prompts up to 200k tokens).
	"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gemini-2.5-flash":      {Input: 0.30, Output: 2.50, CacheRead: 0.03},
	"gemini-2.5-flash-lite": {Input: 0.10, Output: 0.40, CacheRead: 0.01},
	"gemini-2.0-flash":      {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	// xAI: reasoning tokens are billed at the output price; Herald records
	// them inside output_tokens (profile "xai"), so they are priced once.
	"grok-4":        {Input: 3, Output: 15, CacheRead: 0.75},
	"grok-4-fast":   {Input: 0.20, Output: 0.50, CacheRead: 0.05},
	"grok-4-1-fast": {Input: 0.20, Output: 0.50, CacheRead: 0.05},
	"grok-3":        {Input: 3, Output: 15, CacheRead: 0.75},
	"grok-3-mini":   {Input: 0.30, Output: 0.50, CacheRead: 0.075},
	// Groq.
	"llama-3.3-70b-versatile": {Input: 0.59, Output: 0.79},
	"llama-3.1-8b-instant":    {Input: 0.05, Output: 0.08},
	// DeepSeek (V3.2 prices; cache hits at the cache rate).
	"deepseek-chat":     {Input: 0.28, Output: 0.42, CacheRead: 0.028},
	"deepseek-reasoner": {Input: 0.28, Output: 0.42, CacheRead: 0.028},
}

func init() {
	// Long prompts: Gemini 2.5 Pro above 200k input tokens
	// (https://ai.google.dev/gemini-api/docs/pricing); Claude Sonnet 4 and
	// 4.5 with the 1M-token context, above 200k
	// (https://docs.anthropic.com/en/docs/about-claude/pricing#long-context-pricing).
	withTier("gemini-2.5-pro", Tier{AboveInputTokens: 200_000, Input: f(2.50), Output: f(15), CacheRead: f(0.25)})
	withTier("claude-sonnet-4", Tier{AboveInputTokens: 200_000, Input: f(6), Output: f(22.50), CacheRead: f(0.60), CacheWrite: f(7.50)})
	// Perplexity Sonar: token prices plus a fee per request that depends on
	// its search context size, which the usage reports
	// (https://docs.perplexity.ai/getting-started/pricing).
	contexts := map[string]float64{"search_context_low": 0.005, "search_context_medium": 0.008, "search_context_high": 0.012}
	builtin["sonar"] = Price{Input: 1, Output: 1, Fees: contexts}
	builtin["sonar-pro"] = Price{Input: 3, Output: 15,
		Fees: map[string]float64{"search_context_low": 0.006, "search_context_medium": 0.010, "search_context_high": 0.014}}
	// Anthropic's web search tool: $10 per 1,000 searches, reported as
	// usage.server_tool_use.web_search_requests
	// (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool).
	for prefix, p := range builtin {
		if strings.HasPrefix(prefix, "claude-") {
			p.Fees = map[string]float64{FeeWebSearch: 0.01}
			builtin[prefix] = p
		}
	}
}

// FeeWebSearch is the fee of one web search a provider ran for the model.
const FeeWebSearch = "web_search"

func withTier(prefix string, t Tier) {
	p := builtin[prefix]
	p.Tiers = append(p.Tiers, t)
	builtin[prefix] = p
}
