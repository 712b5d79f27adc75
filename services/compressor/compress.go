package compressor

import (
	"context"
	"fmt"

	"github.com/heraldrun/herald/pkg/models"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// ReasonOverflow is the request reason after the provider rejected the
// prompt as too long: then pruning alone is never trusted to be enough.
const ReasonOverflow = "overflow"

// summarizeFunc writes the summary body of middle, updating previous (the
// body of an earlier summary, "" when none), and reports what the call
// spent (zero when no model was asked).
type summarizeFunc func(ctx context.Context, req *heraldpb.CompressRequest, goal string, middle []*heraldpb.ChatMessage, previous string) (string, spend, error)

// compression is the outcome of one request.
type compression struct {
	messages      []*heraldpb.ChatMessage
	before, after int64
	pruned        int
	summarized    bool
	// summaryErr is why the model's summary was replaced by the deterministic one.
	summaryErr error
	// spent is what the summary call cost, also when its answer was unusable.
	spent spend
}

// compressor runs the three passes with one configuration.
type compressor struct {
	cfg       Config
	summarize summarizeFunc
}

// window is the request's context window, else the model table's.
func (c *compressor) window(req *heraldpb.CompressRequest) int64 {
	if req.ContextWindow > 0 {
		return req.ContextWindow
	}
	return int64(models.ContextWindow(req.Model, c.cfg.ContextWindows))
}

// protect returns the head and tail sizes: the request's, else the config's.
func (c *compressor) protect(req *heraldpb.CompressRequest) (int, int) {
	first, last := int(req.ProtectFirstN), int(req.ProtectLastN)
	if first <= 0 {
		first = c.cfg.ProtectFirstN
	}
	if last <= 0 {
		last = c.cfg.ProtectLastN
	}
	return first, last
}

// compress shrinks req's history: pass 1 prunes old tool outputs; when that
// is not enough (or the provider overflowed), passes 2 and 3 keep the head
// and tail and replace the middle with one summary.
func (c *compressor) compress(ctx context.Context, req *heraldpb.CompressRequest) compression {
	msgs := req.Messages
	out := compression{before: estimateTokens(msgs)}
	window := c.window(req)
	trigger := int64(float64(window) * c.cfg.Threshold)
	fit := int64(float64(trigger) * c.cfg.FitRatio)
	first, last := c.protect(req)

	headEnd, tailStart := split(msgs, first, last)
	pruned, n := pruneToolOutputs(msgs, headEnd, tailStart, c.cfg.MinPruneChars)
	out.messages, out.pruned = pruned, n
	if (req.Reason != ReasonOverflow && estimateTokens(pruned) <= fit) || tailStart <= headEnd {
		out.messages = squeeze(out.messages, tailStart, fit, c.cfg.MinPruneChars)
		out.after = estimateTokens(out.messages)
		return out
	}
	head, tail := pruned[:headEnd], pruned[tailStart:]
	middle := msgs[headEnd:tailStart]
	goal, previous := firstUserGoal(msgs), previousSummary(middle)
	body, spent, err := c.summarize(ctx, req, goal, middle, previous)
	out.spent = spent
	if err != nil {
		out.summaryErr = err
		body = deterministicSummary(goal, middle, previous)
	}
	out.summarized = true
	joined := make([]*heraldpb.ChatMessage, 0, len(head)+len(tail)+2)
	joined = append(joined, head...)
	joined = append(joined, bridge(head, tail, wrapSummary(c.cfg.Keys.Replace(body, redacted)))...)
	joined = append(joined, tail...)
	out.messages = squeeze(joined, len(joined)-len(tail), fit, c.cfg.MinPruneChars)
	out.after = estimateTokens(out.messages)
	return out
}

// squeeze is the last resort when the protected tail alone is too big: it
// prunes the tail's tool outputs except the latest calls', then shortens
// oversized messages, sparing the system prompt and the first user goal.
func squeeze(msgs []*heraldpb.ChatMessage, tailStart int, limit int64, minChars int) []*heraldpb.ChatMessage {
	if estimateTokens(msgs) <= limit {
		return msgs
	}
	msgs, _ = pruneToolOutputs(msgs, tailStart, lastGroupStart(msgs, tailStart), minChars)
	total := estimateTokens(msgs)
	if total <= limit {
		return msgs
	}
	share := max(int(limit*4)/max(len(msgs), 1), 2000)
	goal := firstUserIndex(msgs)
	out := append([]*heraldpb.ChatMessage(nil), msgs...)
	for i, m := range out {
		if m.Role == roleSystem || i == goal || len(m.Content) <= share {
			continue
		}
		out[i] = withContent(m, headTail(m.Content, share))
	}
	return out
}

func firstUserIndex(msgs []*heraldpb.ChatMessage) int {
	for i, m := range msgs {
		if m.Role == roleUser && !isSummary(m) {
			return i
		}
	}
	return -1
}

// headTail keeps the start and end of s within about n characters.
func headTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	keep := n / 2
	headPart := cutRunes(s, keep)
	tailPart := s[len(s)-keep:]
	for len(tailPart) > 0 && !isRuneStart(tailPart[0]) {
		tailPart = tailPart[1:]
	}
	return fmt.Sprintf("%s\n[… %d chars cut to fit the context window …]\n%s", headPart, len(s)-len(headPart)-len(tailPart), tailPart)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
