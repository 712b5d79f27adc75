package gateway

import (
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// carriedHistory: a 4000-character terminal result, answered by the
// assistant, then a fresh 400-character read_file result.
func carriedHistory() []*heraldpb.ChatMessage {
	return []*heraldpb.ChatMessage{
		{Role: "system", Content: strings.Repeat("s", 1000)},
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "terminal", Arguments: `{"command":"cat big"}`}}},
		{Role: "tool", ToolCallId: "c1", Content: strings.Repeat("x", 4000)},
		{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "c2", Name: "read_file", Arguments: `{"path":"a"}`}}},
		{Role: "tool", ToolCallId: "c2", Name: "read_file", Content: strings.Repeat("y", 400)},
	}
}

var testPrice = pricing.Price{Input: 1, CacheRead: 0.5, CacheWrite: 1.25}

func TestCarriedResultInTheCachedPrefixIsPricedAsCacheReads(t *testing.T) {
	// The provider read the whole earlier prompt from its cache: the old
	// result lies in it, the fresh one does not.
	u := &heraldpb.Usage{InputTokens: 100, CacheReadTokens: 1400}
	got := carriedResults(carriedHistory(), nil, u, testPrice, true)
	require.Len(t, got, 2)
	old, fresh := got[0], got[1]
	require.Equal(t, "c1", old.CallId)
	require.Equal(t, "terminal", old.Tool, "named from the assistant's call when the message does not name it")
	require.True(t, old.Estimated)
	require.Equal(t, int64(1001), old.Tokens, "4000 characters / 4, estimated")
	require.Equal(t, int64(1001), old.CacheReadTokens)
	require.Zero(t, old.InputTokens)
	require.Equal(t, uint64(1001*500), old.CostNanoUsd)
	require.Equal(t, "read_file", fresh.Tool)
	require.Equal(t, int64(101), fresh.InputTokens, "a result new in this call is uncached input")
	require.Equal(t, uint64(101*1000), fresh.CostNanoUsd)
}

func TestFreshResultIsNeverACacheReadEvenWhereTheEstimateSaysSo(t *testing.T) {
	// A cache read covering the whole prompt (a provider counting
	// differently from the estimate) still cannot cover what it never saw.
	u := &heraldpb.Usage{CacheReadTokens: 1500}
	got := carriedResults(carriedHistory(), nil, u, testPrice, true)
	require.Equal(t, int64(101), got[1].InputTokens)
	require.Zero(t, got[1].CacheReadTokens)
}

func TestCarriedResultSplitsAcrossTheCacheBoundary(t *testing.T) {
	// A prompt of 5452 characters reported as 5452 tokens (scale 1): the
	// old result spans 1031..5031, a cache read of 4031 tokens covers
	// three quarters of it and the cache write after it the rest.
	u := &heraldpb.Usage{CacheReadTokens: 4031, CacheWriteTokens: 5452 - 4031}
	msgs := carriedHistory()
	_, total := resultSpans(msgs, nil)
	require.Equal(t, 5452, total)
	got := carriedResults(msgs, nil, u, testPrice, true)
	old := got[0]
	require.Equal(t, int64(751), old.CacheReadTokens, "1001 × 0.75, rounded")
	require.Equal(t, int64(250), old.CacheWriteTokens)
	require.Zero(t, old.InputTokens)
	require.Equal(t, uint64(751*500+250*1250), old.CostNanoUsd)
}

func TestUnpricedOrUnreportedPromptsCarryNoCost(t *testing.T) {
	u := &heraldpb.Usage{InputTokens: 1500}
	got := carriedResults(carriedHistory(), nil, u, pricing.Price{}, false)
	require.Len(t, got, 2, "the tokens are still counted")
	require.Zero(t, got[0].CostNanoUsd)
	require.Nil(t, carriedResults(carriedHistory(), nil, &heraldpb.Usage{OutputTokens: 9}, testPrice, true), "no prompt tokens reported")
}
