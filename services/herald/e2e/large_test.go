package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
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
