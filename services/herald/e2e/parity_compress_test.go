package e2e

import (
	"fmt"
	"strings"
	"testing"

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
