package gateway

import (
	"math"

	"github.com/heraldrun/herald/pkg/models"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto/heraldpb"
	"google.golang.org/protobuf/proto"
)

// What a tool result costs in context (docs/COSTS.md): every model call
// that carries a tool result in its prompt pays for its tokens again. The
// gateway, which holds the whole prompt of each attempt and the provider's
// report of it, splits the attempt's prompt among the results it carried:
//
//   - a result's tokens are characters/4 (models.EstimateTokens over its
//     bytes, as the loop's and the compressor's estimates count them: O(1)
//     per result, whatever its size); Herald has no model tokenizer, so
//     every figure is marked estimated;
//   - where a result lies in the prompt is its place in the prompt's
//     characters (tool definitions first, then the messages in order),
//     scaled to the prompt tokens the provider reported;
//   - the provider's cache_read_tokens are the prompt's first tokens and its
//     cache_write_tokens the ones after them: the part of a result inside
//     the first is priced as cache reads, inside the second as cache
//     writes, the rest as uncached input;
//   - a result that is new in this call (after the last assistant message:
//     the previous call did not carry it) was never cached, so none of it
//     is a cache read, whatever the estimate of its place says.
//
// Each part is priced at the token prices of the attempt's own request (its
// tier) with pricing.Price.ShareNano.

// promptSpan is where one tool result lies in a prompt, in characters.
type promptSpan struct {
	msg        *heraldpb.ChatMessage
	start, end int
	fresh      bool // after the last assistant message
}

// carriedResults are the tool results msgs carries, priced as parts of an
// attempt that reported u; nil when it reported no prompt tokens.
func carriedResults(msgs []*heraldpb.ChatMessage, tools []*heraldpb.ToolSpec, u *heraldpb.Usage, price pricing.Price, priced bool) []*heraldpb.CarriedResult {
	prompt := u.GetInputTokens() + u.GetCacheReadTokens() + u.GetCacheWriteTokens()
	if prompt <= 0 {
		return nil
	}
	spans, total := resultSpans(msgs, tools)
	if len(spans) == 0 {
		return nil
	}
	scale := float64(prompt) / float64(max(total, 1))
	read, write := float64(u.GetCacheReadTokens()), float64(u.GetCacheWriteTokens())
	var names map[string]string // built when a result does not name its tool
	out := make([]*heraldpb.CarriedResult, 0, len(spans))
	for _, sp := range spans {
		tokens := models.EstimateTokens(len(sp.msg.GetContent()))
		share := cacheSplit(tokens, float64(sp.start)*scale, float64(sp.end)*scale, read, write, sp.fresh)
		c := &heraldpb.CarriedResult{
			CallId: sp.msg.GetToolCallId(), Tool: sp.msg.GetName(), Tokens: tokens, Estimated: true,
			InputTokens: share.InputTokens, CacheReadTokens: share.CacheReadTokens, CacheWriteTokens: share.CacheWriteTokens,
		}
		if c.Tool == "" {
			if names == nil {
				names = callNames(msgs)
			}
			c.Tool = names[c.CallId]
		}
		if priced {
			c.CostNanoUsd = price.ShareNano(prompt, share)
		} else {
			c.Unpriced = true
		}
		out = append(out, c)
	}
	return out
}

// cacheSplit splits a result of tokens lying at [a, b) of a prompt (in the
// provider's tokens) by the cache ranges the provider reported: [0, read)
// read, [read, read+write) written, the rest uncached input. A fresh result
// has no cache reads.
func cacheSplit(tokens int64, a, b, read, write float64, fresh bool) *heraldpb.Usage {
	readFrac, writeFrac := overlap(a, b, 0, read), overlap(a, b, read, read+write)
	if fresh {
		readFrac = 0
	}
	share := &heraldpb.Usage{
		CacheReadTokens:  int64(math.Round(float64(tokens) * readFrac)),
		CacheWriteTokens: int64(math.Round(float64(tokens) * writeFrac)),
	}
	share.CacheWriteTokens = min(share.CacheWriteTokens, tokens-share.CacheReadTokens)
	share.InputTokens = tokens - share.CacheReadTokens - share.CacheWriteTokens
	return share
}

// resultSpans finds the tool results in the prompt and the prompt's length,
// in characters (bytes: only their proportions matter).
func resultSpans(msgs []*heraldpb.ChatMessage, tools []*heraldpb.ToolSpec) ([]promptSpan, int) {
	pos := 0
	for _, t := range tools {
		pos += len(t.GetName()) + len(t.GetDescription()) + len(t.GetParametersJson())
	}
	lastAssistant := -1
	for i, m := range msgs {
		if m.GetRole() == "assistant" {
			lastAssistant = i
		}
	}
	var spans []promptSpan
	for i, m := range msgs {
		if m.GetRole() == "tool" && m.GetToolCallId() != "" {
			spans = append(spans, promptSpan{msg: m, start: pos, end: pos + len(m.GetContent()), fresh: i > lastAssistant})
		}
		pos += messageChars(m)
	}
	return spans, pos
}

func messageChars(m *heraldpb.ChatMessage) int {
	n := len(m.GetContent()) + len(m.GetReasoning())
	for _, tc := range m.GetToolCalls() {
		n += len(tc.GetName()) + len(tc.GetArguments())
	}
	return n
}

// overlap is the fraction of [a, b) inside [lo, hi); an empty span counts
// as inside when its point is.
func overlap(a, b, lo, hi float64) float64 {
	if b <= a {
		if a >= lo && a < hi {
			return 1
		}
		return 0
	}
	in := min(b, hi) - max(a, lo)
	if in <= 0 {
		return 0
	}
	return in / (b - a)
}

// callNames maps the call ids of the assistant's tool calls to their tools,
// for tool messages that do not name theirs.
func callNames(msgs []*heraldpb.ChatMessage) map[string]string {
	names := map[string]string{}
	for _, m := range msgs {
		for _, tc := range m.GetToolCalls() {
			names[tc.GetId()] = tc.GetName()
		}
	}
	return names
}

// carried prices the tool results of this run's prompt for an attempt on
// model that reported u, and counts them in the process's metrics.
func (r *callRun) carried(model string, u *heraldpb.Usage) []*heraldpb.CarriedResult {
	price, source := r.s.pricer.Lookup(model)
	out := carriedResults(r.req.GetMessages(), r.req.GetTools(), u, price, source != PriceUnknown)
	for _, c := range out {
		telemetry.ToolContext(metricTool(c.GetTool(), r.req.GetTools()), c)
	}
	return out
}

// metricTool is a tool's metric label: a tool the request offers, else
// "other" (a model may name tools that do not exist, and each name would
// be a series of its own).
func metricTool(name string, tools []*heraldpb.ToolSpec) string {
	for _, t := range tools {
		if t.GetName() == name {
			return name
		}
	}
	return "other"
}

// The answer stored with a call keeps its usage events without their
// carried results: a redelivered request that finds the answer has the
// same prompt in hand, so restoreUsage computes them again (recarry), and
// the bytes each step stores do not grow twice with the history's results.

// withoutCarried is ev as the stored answer keeps it.
func withoutCarried(ev *heraldpb.UsageEvent) *heraldpb.UsageEvent {
	if len(ev.GetCarried()) == 0 {
		return ev
	}
	c := proto.Clone(ev).(*heraldpb.UsageEvent)
	c.Carried = nil
	return c
}

// recarry gives a usage event restored from a stored answer the carried
// results of req's prompt, as bill gave them.
func (s *Service) recarry(req *heraldpb.LLMRequest, ev *heraldpb.UsageEvent) {
	if len(ev.GetCarried()) > 0 || !reported(ev.GetUsage()) {
		return
	}
	price, source := s.pricer.Lookup(ev.GetModel())
	ev.Carried = carriedResults(req.GetMessages(), req.GetTools(), ev.GetUsage(), price, source != PriceUnknown)
}
