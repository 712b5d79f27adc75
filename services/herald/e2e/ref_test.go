package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A model request refers to the session's transcript instead of carrying
// it: after a step that read 100 KB into the history, each later request on
// the bus is a small fraction of that, yet the model sees the whole history,
// message for message as the transcript holds it.
func TestModelRequestsCarryWhatTheStepAddedNotTheHistory(t *testing.T) {
	const steps = 4
	script := func(r *scripted.Request) scripted.Reply {
		switch n := r.AssistantCount(); {
		case n == 0:
			return scripted.Tool("read_file", `{"path":"big.txt","limit":10000}`)
		case n < steps:
			return scripted.Tool("read_file", fmt.Sprintf(`{"path":"small.txt","limit":%d}`, n))
		}
		return scripted.Text("done")
	}
	h := Start(t, script, WithConfig(func(c *config.Config) {
		c.Compression.Enabled = false
		c.ToolOutput.MaxResultChars = 400_000
	}))
	line := strings.Repeat("0123456789", 5) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(h.Workspace, "big.txt"), []byte(strings.Repeat(line, 4000)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.Workspace, "small.txt"), []byte("a small file\n"), 0o644))

	task := NewTask("read the big file, then the small one")
	task.MaxIterations = steps + 2
	var mu sync.Mutex
	var sizes []int
	sub, err := h.NC.Subscribe(bus.LLMRequest(task.SessionID), func(m *nats.Msg) {
		mu.Lock()
		sizes = append(sizes, len(m.Data))
		mu.Unlock()
	})
	require.NoError(t, err)
	res := h.Run(task)
	require.NoError(t, sub.Unsubscribe())
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "done", res.FinalResponse)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sizes, steps+1)
	require.Greater(t, sizes[1], 100_000, "the step that read big.txt carries it once")
	for i, n := range sizes[2:] {
		require.Less(t, n, 20_000, "request %d carries only what its step added", i+2)
	}

	reqs := h.RequestsOf(task.Prompt)
	require.Len(t, reqs, steps+1)
	stored := h.Transcript(task.SessionID)
	last := reqs[len(reqs)-1].Messages
	require.Len(t, last, len(stored)-1, "the last request holds every message but the answer")
	for i, m := range last {
		require.Equal(t, wireText(stored[i]), m.Role+":"+m.Text(), "message %d", i)
	}
}

func wireText(m *heraldpb.ChatMessage) string { return m.GetRole() + ":" + m.GetContent() }
