package gateway

import (
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// chatWireUsage is a chat-completions usage report, with the fields outside
// OpenAI's schema that profiles read.
type chatWireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	// PromptCacheHitTokens is DeepSeek's count of cached prompt tokens.
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"`
	// SearchContextSize is Perplexity's search tier of the request (low,
	// medium, high), which sets its request fee.
	SearchContextSize string `json:"search_context_size"`
}

// fees are what the usage reports beyond tokens: Perplexity's request in
// its search context size, priced as the fee search_context_<size>
// (https://docs.perplexity.ai/getting-started/pricing).
func (u chatWireUsage) fees() map[string]int64 {
	switch size := strings.ToLower(u.SearchContextSize); size {
	case "low", "medium", "high":
		return map[string]int64{"search_context_" + size: 1}
	}
	return nil
}

// normalise turns a provider's usage into Herald's classes: input is
// uncached input only; cached and cache-written tokens are their own
// classes; output includes reasoning, whatever the provider's convention,
// and reasoning_tokens says how much of it was reasoning.
func (p Profile) normalise(u chatWireUsage) (*heraldpb.Usage, int64) {
	cached := u.PromptTokensDetails.CachedTokens
	if cached == 0 {
		cached = u.PromptCacheHitTokens
	}
	written := u.PromptTokensDetails.CacheWriteTokens
	output, reasoning := u.CompletionTokens, u.CompletionTokensDetails.ReasoningTokens
	switch p.ReasoningTokens {
	case ReasoningSeparate:
		output += reasoning
	case ReasoningTotalOnly:
		if extra := u.TotalTokens - u.PromptTokens - u.CompletionTokens; extra > 0 {
			output += extra
			reasoning = max(reasoning, extra)
		}
	}
	return &heraldpb.Usage{
		InputTokens:      max(u.PromptTokens-cached-written, 0),
		OutputTokens:     output,
		CacheReadTokens:  cached,
		CacheWriteTokens: written,
		ReasoningTokens:  reasoning,
	}, u.PromptTokens
}

func (u *chatWireUsage) add(v chatWireUsage) {
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	u.TotalTokens += v.TotalTokens
	u.PromptTokensDetails.CachedTokens += v.PromptTokensDetails.CachedTokens
	u.PromptTokensDetails.CacheWriteTokens += v.PromptTokensDetails.CacheWriteTokens
	u.CompletionTokensDetails.ReasoningTokens += v.CompletionTokensDetails.ReasoningTokens
	u.PromptCacheHitTokens += v.PromptCacheHitTokens
	if v.SearchContextSize != "" {
		u.SearchContextSize = v.SearchContextSize
	}
}

// overwrite takes every count v holds: a later report of a running total
// replaces the earlier one, and a report that omits a count keeps it.
func (u *chatWireUsage) overwrite(v chatWireUsage) {
	keep := func(dst *int64, src int64) {
		if src != 0 {
			*dst = src
		}
	}
	keep(&u.PromptTokens, v.PromptTokens)
	keep(&u.CompletionTokens, v.CompletionTokens)
	keep(&u.TotalTokens, v.TotalTokens)
	keep(&u.PromptTokensDetails.CachedTokens, v.PromptTokensDetails.CachedTokens)
	keep(&u.PromptTokensDetails.CacheWriteTokens, v.PromptTokensDetails.CacheWriteTokens)
	keep(&u.CompletionTokensDetails.ReasoningTokens, v.CompletionTokensDetails.ReasoningTokens)
	keep(&u.PromptCacheHitTokens, v.PromptCacheHitTokens)
	if v.SearchContextSize != "" {
		u.SearchContextSize = v.SearchContextSize
	}
}
