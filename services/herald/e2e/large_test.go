package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/memory"
	"github.com/stretchr/testify/require"
)

// A session whose history grows past 5 MB runs on a NATS server that takes
// at most 1 MB per message: requests over the limit travel by claim-check.
func TestHistoryLargerThanTheNATSMaxPayload(t *testing.T) {
	const steps = 11 // each step adds ~510 KB of tool output
	script := func(r *scripted.Request) scripted.Reply {
		if n := r.AssistantCount(); n < steps {
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"big.txt","offset":%d,"limit":10000}`, n+1))
		}
		return scripted.Text("read it all")
	}
	h := Start(t, script,
		func(_ *config.Config, o *app.Options) { o.NATSMaxPayload = 1 << 20 },
		WithConfig(func(c *config.Config) {
			c.ContextWindows = map[string]int{"test-model": 100_000_000}
			c.Compression.Enabled = false
			c.ToolOutput.MaxResultChars = 600_000
			c.ToolOutput.ReadFileMaxLines = 20_000
		}))
	line := strings.Repeat("0123456789", 5) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(h.Workspace, "big.txt"), []byte(strings.Repeat(line, 10_000)), 0o644))
	task := NewTask("read the big file again and again")
	task.MaxIterations = steps + 2
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "read it all", res.FinalResponse)

	reqs := h.RequestsOf(task.Prompt)
	last := reqs[len(reqs)-1]
	require.Greater(t, len(last.Raw), 5<<20, "the last request carried the whole >5 MB history")
	tools := 0
	for _, m := range last.Messages {
		if m.Role == "tool" {
			tools++
		}
	}
	require.Equal(t, steps, tools, "no tool output lost on the way")
	require.Len(t, h.Transcript(task.SessionID), 2+2*steps+1)
}

// A tool output larger than the max payload: its result, its transcript
// entry and the next model request all travel by claim-check. The
// transcript reads back whole (what `herald sessions show` and the loop's
// rebuild read) and session search finds a word that occurs only in it.
func TestToolOutputLargerThanTheNATSMaxPayload(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Tool("read_file", `{"path":"big.txt","limit":100000}`), scripted.Text("that was long")),
		func(_ *config.Config, o *app.Options) { o.NATSMaxPayload = 1 << 20 },
		WithConfig(func(c *config.Config) {
			c.ContextWindows = map[string]int{"test-model": 100_000_000}
			c.Compression.Enabled = false
			c.ToolOutput.MaxResultChars = 4_000_000
			c.ToolOutput.ReadFileMaxLines = 100_000
		}))
	content := "zanzibarquokka\n" + strings.Repeat("lorem ipsum dolor sit amet\n", 50_000)
	require.Greater(t, len(content), 1<<20)
	require.NoError(t, os.WriteFile(filepath.Join(h.Workspace, "big.txt"), []byte(content), 0o644))
	task := NewTask("read big.txt")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "that was long", res.FinalResponse)

	transcript := h.Transcript(task.SessionID)
	require.Len(t, transcript, 5)
	require.Equal(t, "tool", transcript[3].GetRole())
	require.Greater(t, len(transcript[3].GetContent()), 1<<20, "the claimed transcript entry reads back whole")
	require.Contains(t, transcript[3].GetContent(), "zanzibarquokka")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var hits []memory.Hit
	require.Eventually(t, func() bool {
		var err error
		hits, err = memory.Search(ctx, h.JS, "zanzibarquokka", 5)
		return err == nil && len(hits) > 0
	}, 20*time.Second, 50*time.Millisecond, "the memory index holds the claimed entry")
	require.Equal(t, task.SessionID, hits[0].SessionID)
}
