package loop

import (
	"slices"
	"strconv"
	"time"

	"github.com/heraldrun/herald/pkg/models"
	"github.com/heraldrun/herald/proto/heraldpb"
	gproto "google.golang.org/protobuf/proto"
)

const orphanResult = "[No result: this call did not complete.]"

// RepairHistory returns a copy of msgs that providers accept: tool messages
// whose ids match no call of the assistant before them are dropped, calls
// without a result get a stub result, results follow their calls' order,
// and consecutive user messages are merged.
func RepairHistory(msgs []*heraldpb.ChatMessage) []*heraldpb.ChatMessage {
	msgs = slices.DeleteFunc(slices.Clone(msgs), func(m *heraldpb.ChatMessage) bool {
		return m == nil // an entry stored without a message (not written by the loop)
	})
	out := make([]*heraldpb.ChatMessage, 0, len(msgs))
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == "tool" {
			continue // kept only when claimed by the assistant before it
		}
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			out = append(out, m)
			continue
		}
		m = withObjectArgs(m)
		out = append(out, m)
		results := map[string]*heraldpb.ChatMessage{}
		j := i + 1
		for ; j < len(msgs) && msgs[j].Role == "tool"; j++ {
			if _, dup := results[msgs[j].ToolCallId]; !dup {
				results[msgs[j].ToolCallId] = msgs[j]
			}
		}
		for _, c := range m.ToolCalls {
			if r, ok := results[c.Id]; ok {
				out = append(out, r)
				continue
			}
			out = append(out, &heraldpb.ChatMessage{Role: "tool", ToolCallId: c.Id, Name: c.Name, Content: orphanResult})
		}
		i = j - 1
	}
	return mergeAdjacentUsers(out)
}

// withObjectArgs returns m, or a copy of it whose tool calls all carry JSON
// objects as arguments and names of the shape providers accept: strict
// providers refuse a history holding anything else. Sessions recorded before the loop stored repaired arguments, and
// histories from elsewhere, may hold the model's raw text.
func withObjectArgs(m *heraldpb.ChatMessage) *heraldpb.ChatMessage {
	ok := true
	for _, c := range m.ToolCalls {
		if !isObject(c.Arguments) || WireToolName(c.Name) != c.Name {
			ok = false
		}
	}
	if ok {
		return m
	}
	c := gproto.Clone(m).(*heraldpb.ChatMessage)
	for _, tc := range c.ToolCalls {
		if !isObject(tc.Arguments) {
			tc.Arguments = WireArgs(tc.Arguments)
		}
		tc.Name = WireToolName(tc.Name)
	}
	return c
}

// mergeAdjacentUsers joins consecutive user messages into one, and
// consecutive assistant messages without tool calls likewise.
func mergeAdjacentUsers(msgs []*heraldpb.ChatMessage) []*heraldpb.ChatMessage {
	out := make([]*heraldpb.ChatMessage, 0, len(msgs))
	for _, m := range msgs {
		n := len(out)
		if n > 0 && m.Role == "user" && out[n-1].Role == "user" {
			merged := &heraldpb.ChatMessage{Role: "user", Content: out[n-1].Content + "\n\n" + m.Content,
				Scaffolding: out[n-1].Scaffolding && m.Scaffolding}
			out[n-1] = merged
			continue
		}
		if n > 0 && m.Role == "assistant" && out[n-1].Role == "assistant" && len(out[n-1].ToolCalls) == 0 {
			merged := &heraldpb.ChatMessage{Role: "assistant", Content: joinText(out[n-1].Content, m.Content),
				Reasoning: joinText(out[n-1].Reasoning, m.Reasoning), ToolCalls: m.ToolCalls,
				ReasoningItems: append(append([]*heraldpb.ReasoningItem{}, out[n-1].ReasoningItems...), m.ReasoningItems...),
				Scaffolding:    out[n-1].Scaffolding && m.Scaffolding}
			out[n-1] = merged
			continue
		}
		out = append(out, m)
	}
	return out
}

func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

func (s *Service) contextWindow(model string) int {
	return models.ContextWindow(model, s.cfg.ContextWindows)
}

func nowMs() int64 { return time.Now().UnixMilli() }

func itoa(n int) string { return strconv.Itoa(n) }
