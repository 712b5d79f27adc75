package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

func TestMemoryContextIsScrubbedAtEverySplitPoint(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"before <memory-context>secret notes</memory-context> after", "before  after"},
		{"<memory-context>all hidden</memory-context>", ""},
		{"a<memory-context>x</memory-context>b<memory-context>y</memory-context>c", "abc"},
		{"less < than and <memory but not a tag", "less < than and <memory but not a tag"},
		{"ends with a partial <memory-cont", "ends with a partial <memory-cont"},
		{"unterminated <memory-context>leaks nothing", "unterminated "},
		{"closing only </memory-context> stays", "closing only </memory-context> stays"},
		{"<<memory-context>>x</memory-context>>", "<>"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, ScrubMemoryContext(tc.in), "whole: %q", tc.in)
		// every way of cutting the text in two chunks
		for i := 0; i <= len(tc.in); i++ {
			var s Scrubber
			got := s.Feed(tc.in[:i]) + s.Feed(tc.in[i:]) + s.Flush()
			require.Equal(t, tc.want, got, "split at %d: %q | %q", i, tc.in[:i], tc.in[i:])
		}
		// and one character at a time
		var s Scrubber
		var b strings.Builder
		for _, c := range tc.in {
			b.WriteString(s.Feed(string(c)))
		}
		b.WriteString(s.Flush())
		require.Equal(t, tc.want, b.String(), "char by char: %q", tc.in)
	}
}

func TestStreamedDeltasNeverShowMemoryContext(t *testing.T) {
	answer := "Sure. <memory-context>user prefers tabs; lives in Oslo</memory-context>Here is the plan."
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: answer, ChunkChars: 3,
		Reasoning: "<memory-context>lives in Oslo</memory-context>Plan first."}))
	ev := r.watch("m1")
	req := r.request("m1", "plan")
	req.Stream = true
	resp := r.call(req)

	want := "Sure. Here is the plan."
	require.Equal(t, want, resp.GetMessage().GetContent())
	require.Equal(t, "Plan first.", resp.GetMessage().GetReasoning())
	require.Eventually(t, func() bool { return ev.text() == want }, 5*time.Second, 5*time.Millisecond)
	for _, d := range ev.ofType("delta") {
		require.NotContains(t, d.Delta, "Oslo")
		require.NotContains(t, d.Delta, "memory")
	}
}
