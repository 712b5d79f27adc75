package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// A task for a pool no tool runner serves is not left waiting in silence:
// after tools.pool_warning_after its session gets a warning event naming
// the pool and how to serve it. A pool that is served gets none.
func TestToolCallForAPoolWithNoRunnerIsWarnedAbout(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Tool("write_file", `{"path":"a.txt","content":"a"}`), scripted.Text("done")),
		WithConfig(func(c *config.Config) { c.Tools.PoolWarningAfter = 500 * time.Millisecond }))
	served := NewTask("write it here")
	require.Equal(t, proto.ExitTextResponse, h.Run(served).ExitReason)

	lonely := NewTask("write it on a pool nobody serves")
	lonely.Pool = "gpu"
	h.Submit(lonely)
	// The session is also warned that no runner of its pool answered for
	// its context files; the call's own warning names its tool.
	var warning proto.Event
	require.Eventually(t, func() bool {
		for _, w := range h.EventsOfType(lonely.SessionID, proto.EventWarning) {
			if w.Tool == "write_file" {
				warning = w
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "no warning for a call nobody takes")
	require.True(t, strings.Contains(warning.Message, `pool "gpu"`) && strings.Contains(warning.Message, "herald serve toolrunner --pool gpu"), warning.Message)
	require.Empty(t, h.EventsOfType(served.SessionID, proto.EventWarning), "a served pool's call is not warned about")
}
