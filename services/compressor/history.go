package compressor

import (
	"strings"

	"github.com/heraldrun/herald/pkg/models"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// Roles of chat messages.
const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// messageChars is what a message costs in the prompt, in characters.
func messageChars(m *heraldpb.ChatMessage) int {
	n := len(m.Content) + len(m.Reasoning) + len(m.Role) + 4
	for _, it := range m.ReasoningItems { // sent back with the message: signatures, encrypted reasoning
		n += len(it.Json)
	}
	for _, c := range m.ToolCalls {
		n += len(c.Id) + len(c.Name) + len(c.Arguments) + 8
	}
	return n
}

// estimateTokens is the chars/4 estimate of a history's prompt size.
func estimateTokens(msgs []*heraldpb.ChatMessage) int64 {
	chars := 0
	for _, m := range msgs {
		chars += messageChars(m)
	}
	return models.EstimateTokens(chars)
}

// callIndex maps each tool call id to the assistant call that made it.
func callIndex(msgs []*heraldpb.ChatMessage) map[string]*heraldpb.ToolCall {
	calls := map[string]*heraldpb.ToolCall{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			calls[c.Id] = c
		}
	}
	return calls
}

// isSummary reports whether m is a summary an earlier compression wrote.
func isSummary(m *heraldpb.ChatMessage) bool {
	return strings.HasPrefix(m.Content, SummaryPrefix)
}

// firstUserGoal is the first user message's text: what the session is for.
func firstUserGoal(msgs []*heraldpb.ChatMessage) string {
	for _, m := range msgs {
		if m.Role == roleUser && !isSummary(m) {
			return m.Content
		}
	}
	return ""
}

// withContent returns a copy of m with other content, leaving m untouched
// (the request's messages are never modified in place).
func withContent(m *heraldpb.ChatMessage, content string) *heraldpb.ChatMessage {
	return &heraldpb.ChatMessage{Role: m.Role, Content: content, Reasoning: m.Reasoning, ReasoningItems: m.ReasoningItems,
		ToolCalls: m.ToolCalls, ToolCallId: m.ToolCallId, Name: m.Name}
}
