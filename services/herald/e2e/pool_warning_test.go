package e2e

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A task for a pool no tool runner serves is not left waiting in silence:
// after tools.pool_warning_after its session gets a warning event naming
// the pool and how to serve it. A pool that is served gets none, and its
// answered call asks the stream nothing: only the waiting call's watch
// looks at TOOL_CALLS.
func TestToolCallForAPoolWithNoRunnerIsWarnedAbout(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Tool("write_file", `{"path":"a.txt","content":"a"}`), scripted.Text("done")),
		WithConfig(func(c *config.Config) { c.Tools.PoolWarningAfter = 500 * time.Millisecond }))
	// what the loop asks TOOL_CALLS about a call: the subject and body of
	// each read of a stored message, in the order it asked
	var mu sync.Mutex
	var asked []string
	for _, subject := range []string{"$JS.API.DIRECT.GET." + bus.StreamToolCalls + ".>", "$JS.API.DIRECT.GET." + bus.StreamToolCalls,
		"$JS.API.STREAM.MSG.GET." + bus.StreamToolCalls} {
		sub, err := h.NC.Subscribe(subject, func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, m.Subject+" "+string(m.Data))
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, h.NC.Flush())
	askedAbout := func(sid string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(asked, func(a string) bool { return strings.Contains(a, sid) })
	}
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
	// the served call's watch would have asked before the lonely one's,
	// on the same connection, so it would be seen first
	require.Eventually(t, func() bool { return askedAbout(lonely.SessionID) }, 10*time.Second, 10*time.Millisecond,
		"the waiting call's watch looks for it in TOOL_CALLS")
	require.False(t, askedAbout(served.SessionID), "TOOL_CALLS was asked about an answered call: %v", asked)
}
