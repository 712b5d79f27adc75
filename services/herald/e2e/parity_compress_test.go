package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// Hermes' 413 cases (tests/run_agent/test_413_compression.py,
// HERMES-TESTS.md §9) through the bus.

// test_413_triggers_compression: a 413 is not a plain 4xx; the history is
// compressed and the same step retried, and the turn succeeds.
func TestParity413CompressesAndSucceeds(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("## Goal\nRead.\n## Remaining work\nAnswer.")
		}
		if lastFileRead(r) < 2 {
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, lastFileRead(r)+1))
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), "file 1 line 0") {
				return scripted.Reply{Status: 413, Body: `{"error":{"message":"Request Entity Too Large"}}`}
			}
		}
		return scripted.Text("Success after compression")
	}, withConfig(func(c *config.Config) {
		c.Compression.ProtectLastN = 2
		c.Compression.ProtectFirstN = 2
	}))
	for i := range 3 {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := NewTask("read three files, then hit 413")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	require.Equal(t, "Success after compression", res.FinalResponse)
	require.NotEmpty(t, res.ContinuedAs, "the session continued compressed")
	require.NotEmpty(t, h.EventsOfType(task.SessionID, proto.EventCompression))
}

// TestOverflowWithCompactionDisabled: with compression off a 413 ends the
// turn after one request, saying why, and nothing is compressed.
func TestParity413WithCompressionDisabledFailsAtOnce(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Reply{Status: 413, Body: `{"error":{"message":"Request Entity Too Large"}}`}),
		withConfig(func(c *config.Config) { c.Compression.Enabled = false }))
	task := NewTask("too large, no compression")
	res := h.Run(task)
	require.NotEqual(t, proto.ExitTextResponse, res.ExitReason)
	require.Len(t, convo(h, task.Prompt), 1)
	require.Contains(t, res.Error, "Too Large")
	require.Empty(t, res.ContinuedAs)
	require.Empty(t, h.EventsOfType(task.SessionID, proto.EventCompression))
}

// §9 test_413_cannot_compress_further and "the 4th overflow compression in
// one turn": a provider that answers 413 however small the history gets is
// compressed for at most 3 times in the step, then the turn ends with the
// provider's error; it never loops.
func TestParity413ThatNeverGoesAwayStopsAfterThreeCompressions(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("## Goal\nRead.")
		}
		if lastFileRead(r) < 2 {
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, lastFileRead(r)+1))
		}
		return scripted.Reply{Status: 413, Body: `{"error":{"message":"Request Entity Too Large"}}`}
	}, withConfig(func(c *config.Config) {
		c.Compression.ProtectLastN = 2
		c.Compression.ProtectFirstN = 2
	}))
	for i := range 3 {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := NewTask("read three files, then 413 forever")
	res := h.Run(task)
	require.NotEqual(t, proto.ExitTextResponse, res.ExitReason)
	require.Contains(t, res.Error, "Too Large")
	count := func(status string) int {
		n := 0
		for _, ev := range h.EventsOfType(task.SessionID, proto.EventCompression) {
			if ev.Status == status {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return count("stopped") == 1 }, 5*time.Second, 10*time.Millisecond,
		"compressions that save nothing stop compression (anti-thrash)")
	require.Equal(t, 3, count("started"), "at most 3 compressions for one step")
}

// §9 test_compression_trigger_excludes_reasoning.py: after a tool step the
// trigger reads the provider's prompt tokens; a long completion or reasoning
// does not count toward it.
func TestParityCompressionTriggerIgnoresCompletionAndReasoningTokens(t *testing.T) {
	for _, tc := range []struct {
		name       string
		usage      scripted.Usage
		compresses bool
	}{
		{"prompt under the threshold, huge reasoning", scripted.Usage{PromptTokens: 40_000, CompletionTokens: 60_000, ReasoningTokens: 55_000}, false},
		{"prompt over the threshold", scripted.Usage{PromptTokens: 60_000, CompletionTokens: 100}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.usage
			h := Start(t, func(r *scripted.Request) scripted.Reply {
				if len(r.Tools) == 0 {
					return scripted.Text("## Goal\nRead.")
				}
				if r.AssistantCount() == 0 {
					return scripted.Reply{ToolCalls: []scripted.Call{{Name: "read_file", Args: `{"path":"a.txt"}`}}, Usage: &u}
				}
				return scripted.Text("done")
			}, withConfig(func(c *config.Config) { c.ContextWindows = map[string]int{"test-model": 100_000} }))
			require.NoError(t, writeWorkspaceFile(h, "a.txt", "alpha"))
			task := NewTask("trigger case " + tc.name)
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			if tc.compresses {
				require.Eventually(t, func() bool { return len(h.EventsOfType(task.SessionID, proto.EventCompression)) > 0 },
					5*time.Second, 10*time.Millisecond)
				return
			}
			require.Empty(t, h.EventsOfType(task.SessionID, proto.EventCompression))
			require.Empty(t, res.ContinuedAs)
		})
	}
}
