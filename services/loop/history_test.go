package loop

import (
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func msg(role, content string) *heraldpb.ChatMessage {
	return &heraldpb.ChatMessage{Role: role, Content: content}
}

func calls(ids ...string) *heraldpb.ChatMessage {
	m := &heraldpb.ChatMessage{Role: "assistant"}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, &heraldpb.ToolCall{Id: id, Name: "read_file", Arguments: "{}"})
	}
	return m
}

func result(id, content string) *heraldpb.ChatMessage {
	return &heraldpb.ChatMessage{Role: "tool", ToolCallId: id, Content: content}
}

func shape(msgs []*heraldpb.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		switch {
		case m.Role == "tool":
			out = append(out, "tool:"+m.ToolCallId+"="+m.Content)
		case len(m.ToolCalls) > 0:
			s := "calls:"
			for _, c := range m.ToolCalls {
				s += c.Id
			}
			out = append(out, s)
		default:
			out = append(out, m.Role+":"+m.Content)
		}
	}
	return out
}

func TestRepairHistory(t *testing.T) {
	cases := []struct {
		name string
		in   []*heraldpb.ChatMessage
		want []string
	}{
		{"well formed is unchanged",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "u"), calls("a"), result("a", "r"), msg("assistant", "done")},
			[]string{"system:s", "user:u", "calls:a", "tool:a=r", "assistant:done"}},
		{"unknown tool id dropped",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "u"), calls("a"), result("a", "r"), result("zz", "stray")},
			[]string{"system:s", "user:u", "calls:a", "tool:a=r"}},
		{"tool message with no call before it dropped",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "u"), result("a", "r"), msg("assistant", "x")},
			[]string{"system:s", "user:u", "assistant:x"}},
		{"orphaned call gets a stub",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "u"), calls("a", "b"), result("b", "rb")},
			[]string{"system:s", "user:u", "calls:ab", "tool:a=" + orphanResult, "tool:b=rb"}},
		{"results in call order",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "u"), calls("a", "b"), result("b", "rb"), result("a", "ra")},
			[]string{"system:s", "user:u", "calls:ab", "tool:a=ra", "tool:b=rb"}},
		{"consecutive users merged",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "one"), msg("user", "two"), msg("assistant", "x")},
			[]string{"system:s", "user:one\n\ntwo", "assistant:x"}},
		{"consecutive assistants merged",
			[]*heraldpb.ChatMessage{msg("system", "s"), msg("user", "u"), msg("assistant", "one"), msg("assistant", "two")},
			[]string{"system:s", "user:u", "assistant:one\n\ntwo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, shape(RepairHistory(tc.in)))
		})
	}
}
