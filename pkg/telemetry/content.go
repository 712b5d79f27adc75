package telemetry

import (
	"encoding/json"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// maxContent bounds one recorded content attribute, so a long history does
// not make a span too large for a collector to take.
const maxContent = 32 << 10

// The message shapes of the GenAI conventions' gen_ai.input.messages and
// gen_ai.output.messages attributes.
type messagePart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

type chatMessage struct {
	Role         string        `json:"role"`
	Parts        []messagePart `json:"parts"`
	FinishReason string        `json:"finish_reason,omitempty"`
}

func convert(m *heraldpb.ChatMessage) chatMessage {
	out := chatMessage{Role: m.GetRole()}
	if m.GetRole() == "tool" {
		out.Parts = append(out.Parts, messagePart{Type: "tool_call_response", ID: m.GetToolCallId(), Response: m.GetContent()})
		return out
	}
	if m.GetReasoning() != "" {
		out.Parts = append(out.Parts, messagePart{Type: "reasoning", Content: m.GetReasoning()})
	}
	if m.GetContent() != "" {
		out.Parts = append(out.Parts, messagePart{Type: "text", Content: m.GetContent()})
	}
	for _, c := range m.GetToolCalls() {
		p := messagePart{Type: "tool_call", ID: c.GetId(), Name: c.GetName()}
		if json.Valid([]byte(c.GetArguments())) {
			p.Arguments = json.RawMessage(c.GetArguments())
		}
		out.Parts = append(out.Parts, p)
	}
	return out
}

func inputMessages(msgs []*heraldpb.ChatMessage) string {
	out := make([]chatMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, convert(m))
	}
	return encodeContent(out)
}

func outputMessages(m *heraldpb.ChatMessage, finish string) string {
	c := convert(m)
	c.FinishReason = finish
	return encodeContent([]chatMessage{c})
}

func encodeContent(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return Truncate(string(data), maxContent)
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…[truncated]"
}
