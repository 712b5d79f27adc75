package compressor

import "github.com/heraldrun/herald/proto/heraldpb"

// split returns where the protected head ends and the protected tail starts:
// head = msgs[:headEnd] (leading system messages and the first firstN
// messages), tail = msgs[tailStart:] (the last lastN). Neither boundary
// separates an assistant's tool calls from their results, and an earlier
// summary is never part of the head (it is rewritten, not kept twice).
func split(msgs []*heraldpb.ChatMessage, firstN, lastN int) (headEnd, tailStart int) {
	for headEnd < len(msgs) && msgs[headEnd].Role == roleSystem {
		headEnd++
	}
	for n := 0; n < firstN && headEnd < len(msgs) && !isSummary(msgs[headEnd]); n++ {
		headEnd++
	}
	headEnd = endOfGroup(msgs, headEnd)
	tailStart = max(len(msgs)-lastN, headEnd)
	for tailStart > headEnd && tailStart < len(msgs) && msgs[tailStart].Role == roleTool {
		tailStart--
	}
	return headEnd, tailStart
}

// endOfGroup moves i past the tool results that belong to the calls just
// before it.
func endOfGroup(msgs []*heraldpb.ChatMessage, i int) int {
	if i == 0 || i > len(msgs) {
		return i
	}
	prev := msgs[i-1]
	if prev.Role != roleTool && !(prev.Role == roleAssistant && len(prev.ToolCalls) > 0) {
		return i
	}
	for i < len(msgs) && msgs[i].Role == roleTool {
		i++
	}
	return i
}

// lastGroupStart is the index of the last assistant message that made tool
// calls in msgs[from:], or len(msgs) when there is none.
func lastGroupStart(msgs []*heraldpb.ChatMessage, from int) int {
	for i := len(msgs) - 1; i >= from; i-- {
		if msgs[i].Role == roleAssistant && len(msgs[i].ToolCalls) > 0 {
			return i
		}
	}
	return len(msgs)
}

// bridge returns the messages that carry summary between head and tail so
// that no two messages of one role touch: the summary itself, plus a short
// acknowledgement when both neighbours leave it no role of its own.
func bridge(head, tail []*heraldpb.ChatMessage, summary string) []*heraldpb.ChatMessage {
	before, after := lastRole(head), firstRole(tail)
	switch {
	case (before == roleSystem || before == "") && after == roleUser:
		// Providers want a user message first after the system prompt.
		return []*heraldpb.ChatMessage{{Role: roleUser, Content: summary}, {Role: roleAssistant, Content: ackNote}}
	case before != roleUser && after != roleUser:
		return []*heraldpb.ChatMessage{{Role: roleUser, Content: summary}}
	case before != roleAssistant && after != roleAssistant:
		return []*heraldpb.ChatMessage{{Role: roleAssistant, Content: summary}}
	case before == roleUser: // and the tail opens with an assistant
		return []*heraldpb.ChatMessage{{Role: roleAssistant, Content: summary}, {Role: roleUser, Content: continueNote}}
	default: // an assistant before, a user after
		return []*heraldpb.ChatMessage{{Role: roleUser, Content: summary}, {Role: roleAssistant, Content: ackNote}}
	}
}

const (
	continueNote = "[Context note: the summary above replaces earlier turns. Continue the task from where the following messages pick up.]"
	ackNote      = "Understood: I will treat that summary as background and continue from the latest messages."
)

func lastRole(msgs []*heraldpb.ChatMessage) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1].Role
}

func firstRole(msgs []*heraldpb.ChatMessage) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[0].Role
}
