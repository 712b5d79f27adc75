package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/stretchr/testify/require"
)

// The README's `nats sub 'herald.session.<sid>.>'`, run with the real nats
// CLI through a session with tool calls, shows JSON only: the documented
// events and result, never the transcript (protobuf, with the system
// prompt) or other internal traffic.
func TestNatsSubOnASessionShowsOnlyJSON(t *testing.T) {
	cli := natsCLI(t)
	h := Start(t, scripted.Conversation(
		scripted.Tool("write_file", `{"path":"a.txt","content":"a"}`),
		scripted.Tool("read_file", `{"path":"a.txt"}`),
		scripted.Text("all done")),
		func(_ *config.Config, o *app.Options) { o.Listen = "127.0.0.1:0" })
	task := NewTask("write then read a file")
	var out, errOut heraldtest.SyncBuffer
	sub := exec.Command(cli, "--server", h.App.Server.ClientURL(), "sub", "--raw", "herald.session."+task.SessionID+".>")
	sub.Stdout, sub.Stderr = &out, &errOut
	require.NoError(t, sub.Start())
	t.Cleanup(func() { _ = sub.Process.Kill(); _ = sub.Wait() })
	// A probe on a public subject of the session says the CLI listens.
	require.Eventually(t, func() bool {
		_ = h.NC.Publish(bus.SessionInput(task.SessionID), []byte(`{"request_id":"probe"}`))
		_ = h.NC.Flush()
		return strings.Contains(out.String(), `"probe"`)
	}, 20*time.Second, 100*time.Millisecond, "nats sub never listened: %s", errOut.String())

	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), `"final_response":"all done"`) },
		20*time.Second, 50*time.Millisecond, "the result never reached nats sub:\n%s", out.String())
	require.NoError(t, sub.Process.Kill())
	_ = sub.Wait()

	types := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not JSON on a public subject: %q", line)
		if ty, ok := m["type"].(string); ok {
			types[ty]++
		}
	}
	for _, want := range []string{proto.EventState, proto.EventDelta, proto.EventToolStarted, proto.EventToolFinished, proto.EventResult} {
		require.Positive(t, types[want], "no %s event in what nats sub showed: %v", want, types)
	}
	_, err := bus.LastOnSubject(t.Context(), h.JS, bus.StreamSessions, bus.SessionLog(task.SessionID))
	require.NoError(t, err, "the transcript is kept, on its internal subject")
}
