package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/loop"
	"github.com/stretchr/testify/require"
)

const compressGoal = "read every numbered file, one per step, and report when done"

var fileArg = regexp.MustCompile(`f(\d+)\.txt`)

// lastFileRead is the number of the file the conversation read last, -1 if none.
func lastFileRead(r *scripted.Request) int {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		for _, c := range r.Messages[i].ToolCalls {
			if m := fileArg.FindStringSubmatch(c.Function.Arguments); m != nil {
				n, _ := strconv.Atoi(m[1])
				return n
			}
		}
	}
	return -1
}

func fileContent(n int) string {
	var b strings.Builder
	for line := 0; b.Len() < 2400; line++ {
		fmt.Fprintf(&b, "file %d line %d: the quick brown fox jumps over the lazy dog\n", n, line)
	}
	return b.String()
}

func TestLoopLongSessionIsCompressedUnderTheWindow(t *testing.T) {
	const steps, window = 200, 40000
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("## Goal\nRead the files.\n## Completed actions\nRead some files.\n## Remaining work\nRead the rest.")
		}
		next := lastFileRead(r) + 1
		if next >= steps {
			return scripted.Text(fmt.Sprintf("Read all %d files.", steps))
		}
		return scripted.Tool("read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, next))
	}, withConfig(func(c *config.Config) {
		c.ContextWindows = map[string]int{"test-model": window}
	}))
	for i := range steps {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := taskWith(compressGoal, steps+10)
	h.Submit(task)
	res := h.WaitResult(task, 120*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	require.Equal(t, "Read all 200 files.", res.FinalResponse)
	require.NotEmpty(t, res.ContinuedAs, "the compressed history continues under a new id")

	agent := 0
	biggest := 0
	for _, r := range h.Model.Requests() {
		biggest = max(biggest, len(r.Raw)/4)
		require.Less(t, len(r.Raw)/4, window, "every request fits the context window")
		if len(r.Tools) > 0 {
			agent++
			requireWellFormed(t, r)
			require.Equal(t, compressGoal, r.FirstUser(), "the first user goal is kept verbatim")
		}
	}
	require.Equal(t, steps+1, agent)

	msgs := h.Transcript(task.SessionID)
	require.Equal(t, "system", msgs[0].Role)
	require.Equal(t, compressGoal, msgs[1].Content)
	last := msgs[len(msgs)-1]
	require.Equal(t, res.FinalResponse, last.Content)
	require.Contains(t, msgs[len(msgs)-2].Content, "file 199 line 0", "the latest tool output is verbatim")

	var done, started int
	for _, ev := range h.EventsOfType(task.SessionID, proto.EventCompression) {
		switch ev.Status {
		case "done":
			done++
		case "started":
			started++
		}
	}
	t.Logf("%d requests, %d compressions, biggest request %d tokens of %d", len(h.Model.Requests()), done, biggest, window)
	require.Positive(t, done)
	require.Less(t, done, steps/4, "compression does not thrash")
	st, err := loop.LoadSession(t.Context(), h.JS, task.SessionID)
	require.NoError(t, err)
	require.Equal(t, task.SessionID, st.Logs[0], "lineage: the first log is the session's own")
	require.Equal(t, res.ContinuedAs, st.LogSID)
	require.Equal(t, started, done)
	require.Contains(t, res.ContinuedAs, task.SessionID+"-c")
}

func TestLoopCompressesAfterAContextOverflowError(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("## Goal\nRead.\n## Remaining work\nAnswer.")
		}
		if lastFileRead(r) < 2 {
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, lastFileRead(r)+1))
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), "file 1 line 0") {
				return scripted.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4000 tokens","code":"context_length_exceeded"}}`}
			}
		}
		return scripted.Text("done after compression")
	}, withConfig(func(c *config.Config) {
		c.Compression.ProtectLastN = 2
		c.Compression.ProtectFirstN = 2
	}))
	for i := range 3 {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := NewTask("read three files")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	require.Equal(t, "done after compression", res.FinalResponse)
	require.NotEmpty(t, res.ContinuedAs)
}

func TestLoopOverflowWithoutCompressionFails(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Reply{Status: 400,
		Body: `{"error":{"message":"prompt is too long","code":"context_length_exceeded"}}`}),
		withConfig(func(c *config.Config) { c.Compression.Enabled = false }))
	task := NewTask("too long")
	res := h.Run(task)
	require.Equal(t, proto.ExitFailed, res.ExitReason, "refused, and nothing was retried")
	require.Contains(t, res.Error, "too long")
}

func TestLoopStopsCompressingWhenItNoLongerHelps(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("## Goal\nRead.")
		}
		next := lastFileRead(r) + 1
		if next >= 12 {
			return scripted.Text("read them all")
		}
		return scripted.Tool("read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, next))
	}, withConfig(func(c *config.Config) {
		c.ContextWindows = map[string]int{"test-model": 8000}
		c.Compression.ProtectFirstN = 100
		c.Compression.ProtectLastN = 100
	}))
	for i := range 12 {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := taskWith("read twelve files", 20)
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	var statuses []string
	for _, ev := range h.EventsOfType(task.SessionID, proto.EventCompression) {
		statuses = append(statuses, ev.Status)
		if ev.Status == "stopped" {
			require.Contains(t, ev.Message, "new session")
		}
	}
	t.Logf("compression events: %v", statuses)
	require.Contains(t, statuses, "stopped")
	require.Equal(t, "stopped", statuses[len(statuses)-1], "no compression after it stopped")
}
