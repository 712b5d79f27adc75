package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/pkg/scripted"
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
	require.True(t, got[0].Unpriced, "unknown, not free")
	require.Nil(t, carriedResults(carriedHistory(), nil, &heraldpb.Usage{OutputTokens: 9}, testPrice, true), "no prompt tokens reported")
}

// withToolResult is req with a 4000-character read_file result in its history.
func withToolResult(req *heraldpb.LLMRequest) *heraldpb.LLMRequest {
	req.Messages = append(req.Messages,
		&heraldpb.ChatMessage{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		&heraldpb.ChatMessage{Role: "tool", ToolCallId: "c1", Name: "read_file", Content: strings.Repeat("z", 4000)})
	return req
}

func pricedM1(c *Config) {
	c.Pricing = map[string]config.Price{"m1": {Input: 1, Output: 2, CacheRead: 0.5}}
}

func TestCarriedResultsTravelOnTheUsageEventNotTheStoredAnswer(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), pricedM1)
	resp := r.call(withToolResult(r.request("s-carry", "read a")))
	require.Len(t, resp.GetUsageEvents(), 1)
	require.Empty(t, resp.GetUsageEvents()[0].GetCarried(), "the stored answer does not grow with the history's results")
	var usage []*heraldpb.UsageEvent
	require.Eventually(t, func() bool { usage = r.usageEvents(); return len(usage) == 1 }, 5*time.Second, 10*time.Millisecond)
	carried := usage[0].GetCarried()
	require.Len(t, carried, 1)
	require.Equal(t, "c1", carried[0].GetCallId())
	require.Equal(t, int64(1001), carried[0].GetTokens())
	require.Equal(t, uint64(1001*1000), carried[0].GetCostNanoUsd(), "new in this call: uncached input at $1 per million")
}

func TestARestoredUsageEventCarriesTheResultsOfItsPrompt(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("never asked")), pricedM1)
	req := withToolResult(r.request("s-recarry", "read a"))
	r.publish(req)
	// The gateway before stored the answer (its usage events without their
	// carried results) and died before the usage event itself was stored.
	die := r.takeAndDie(1)
	billed := r.storeAnswerWithUsage(req, 1_234)
	die()

	r.start()
	r.requestsDrained("the redelivered request is acknowledged")
	usage := r.usageEvents()
	require.Len(t, usage, 1)
	require.Equal(t, billed.GetEventId(), usage[0].GetEventId())
	want := carriedResults(req.GetMessages(), nil, billed.GetUsage(), config.Price{Input: 1, Output: 2, CacheRead: 0.5}, true)
	require.Len(t, want, 1)
	require.Len(t, usage[0].GetCarried(), 1, "computed again from the redelivered request's prompt")
	require.Equal(t, want[0].GetTokens(), usage[0].GetCarried()[0].GetTokens())
	require.Equal(t, want[0].GetCostNanoUsd(), usage[0].GetCarried()[0].GetCostNanoUsd())
	require.Zero(t, r.model.Calls())
}

func TestAToolTheRequestDidNotOfferIsCountedAsOther(t *testing.T) {
	tools := []*heraldpb.ToolSpec{{Name: "read_file"}, {Name: "terminal"}}
	require.Equal(t, "terminal", metricTool("terminal", tools))
	require.Equal(t, "other", metricTool("made_up_by_the_model_1234", tools), "each invented name would be a series of its own")
	require.Equal(t, "other", metricTool("", tools))
}

// BenchmarkCarriedResults: the work bill adds to a model call whose prompt
// holds a 1 MB tool result and 100 small ones.
func BenchmarkCarriedResults(b *testing.B) {
	msgs := []*heraldpb.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "go"}}
	for i := range 101 {
		content := strings.Repeat("r", 200)
		if i == 0 {
			content = strings.Repeat("R", 1<<20)
		}
		id := strings.Repeat("c", 8) + string(rune('a'+i%26))
		msgs = append(msgs, &heraldpb.ChatMessage{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: id, Name: "terminal", Arguments: `{"command":"ls"}`}}},
			&heraldpb.ChatMessage{Role: "tool", ToolCallId: id, Name: "terminal", Content: content})
	}
	u := &heraldpb.Usage{InputTokens: 5000, CacheReadTokens: 270_000}
	b.ReportAllocs()
	for b.Loop() {
		if len(carriedResults(msgs, nil, u, testPrice, true)) != 101 {
			b.Fatal("results lost")
		}
	}
}

// Pruning replaces an old result by a one-line stand-in under the same
// call id: from then on the call is charged for the stand-in only.
func TestAPrunedResultIsChargedAtItsStandInsSize(t *testing.T) {
	msgs := carriedHistory()
	msgs[3] = &heraldpb.ChatMessage{Role: "tool", ToolCallId: "c1", Content: "[pruned terminal output: `cat big` exited 0, 1 lines of output]"}
	got := carriedResults(msgs, nil, &heraldpb.Usage{InputTokens: 400}, testPrice, true)
	require.Equal(t, "c1", got[0].CallId)
	require.Equal(t, int64(len(msgs[3].Content)/4+1), got[0].Tokens, "the stand-in's 16 tokens, not the 1001 of the result")
}
