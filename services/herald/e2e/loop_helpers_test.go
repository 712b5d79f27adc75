package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/loop"
	"github.com/stretchr/testify/require"
)

// withConfig adjusts the global configuration of a harness.
func withConfig(f func(c *config.Config)) Option { return WithConfig(f) }

// taskWith returns a fresh task with max_iterations set.
func taskWith(prompt string, maxIter int) proto.Task {
	task := NewTask(prompt)
	task.MaxIterations = maxIter
	return task
}

// stateNames lists the state events of a session, in order, once its DONE arrived.
func stateNames(t *testing.T, h *H, sid string) []string {
	t.Helper()
	var names []string
	require.Eventually(t, func() bool {
		names = nil
		for _, ev := range h.EventsOfType(sid, proto.EventState) {
			names = append(names, ev.State)
		}
		return len(names) > 0 && names[len(names)-1] == proto.StateDone
	}, 5*time.Second, 10*time.Millisecond)
	return names
}

// roles is the sequence of roles of msgs.
func roles(msgs []*heraldpb.ChatMessage) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role)
	}
	return strings.Join(out, ",")
}

// wireRoles is the sequence of roles of a request's messages.
func wireRoles(r *scripted.Request) string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Role)
	}
	return strings.Join(out, ",")
}

// requireWellFormed checks the message rules on what the model received:
// system first, no two users or assistants in a row, and every assistant's
// tool calls answered by exactly one tool message each, in call order.
func requireWellFormed(t *testing.T, r *scripted.Request) {
	t.Helper()
	msgs := r.Messages
	require.NotEmpty(t, msgs)
	require.Equal(t, "system", msgs[0].Role)
	for i := 1; i < len(msgs); i++ {
		m, prev := msgs[i], msgs[i-1]
		require.NotEqual(t, "system", m.Role, "system message only first")
		if m.Role != "tool" {
			require.False(t, m.Role == prev.Role, "two %s messages in a row at %d: %s", m.Role, i, wireRoles(r))
		}
		if m.Role == "tool" {
			require.True(t, prev.Role == "tool" || (prev.Role == "assistant" && len(prev.ToolCalls) > 0),
				"tool message %d follows %s", i, prev.Role)
		}
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			require.GreaterOrEqual(t, len(msgs), i+1+len(m.ToolCalls), "calls of message %d unanswered", i)
			for k, c := range m.ToolCalls {
				res := msgs[i+1+k]
				require.Equal(t, "tool", res.Role, "call %d of message %d has no result", k, i)
				require.Equal(t, c.ID, res.ToolCallID, "results in call order")
			}
			if j := i + 1 + len(m.ToolCalls); j < len(msgs) {
				require.NotEqual(t, "tool", msgs[j].Role, "extra tool message after the calls of %d", i)
			}
		}
	}
}

// requireNoScaffolding checks that nothing the loop injected to drive a
// retry made it into the persisted transcript.
func requireNoScaffolding(t *testing.T, msgs []*heraldpb.ChatMessage, texts ...string) {
	t.Helper()
	for _, m := range msgs {
		require.False(t, m.Scaffolding, "scaffolding persisted: %q", m.Content)
		for _, s := range texts {
			require.NotContains(t, m.Content, s, "scaffolding text persisted in a %s message", m.Role)
		}
	}
}

// toolContents returns the content of every tool message.
func toolContents(msgs []*heraldpb.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// interrupt publishes an interrupt for a session.
func (h *H) interrupt(sid string) {
	h.t.Helper()
	require.NoError(h.t, h.NC.Publish(bus.SessionInterrupt(sid), []byte(`{}`)))
}

// stepRead is a script step reading a different file each step, so no two
// rounds repeat.
func stepRead(r *scripted.Request) scripted.Reply {
	return scripted.Tool("read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, r.AssistantCount()))
}

// convo returns the model requests of one conversation: those whose first
// user message starts with prompt (a retry nudge may be merged into it).
func convo(h *H, prompt string) []*scripted.Request {
	var out []*scripted.Request
	for _, r := range h.Model.Requests() {
		if strings.HasPrefix(r.FirstUser(), prompt) {
			out = append(out, r)
		}
	}
	return out
}

// lastAssistant is the content of the last assistant message of a request.
func lastAssistant(r *scripted.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "assistant" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// lastRequest is the last request of a conversation.
func lastRequest(t *testing.T, h *H, prompt string) *scripted.Request {
	t.Helper()
	reqs := convo(h, prompt)
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}

func writeWorkspaceFile(h *H, name, content string) error {
	return os.WriteFile(filepath.Join(h.Workspace, name), []byte(content), 0o644)
}

func readWorkspaceFile(h *H, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(h.Workspace, name))
	return string(b), err
}

// startWithLoop is Start with the loop's own configuration adjusted: the
// harness runs every other service, and the loop is started here the way
// the herald binary starts it, from the same global configuration.
func startWithLoop(t *testing.T, script scripted.Script, adjust func(*loop.Config), opts ...Option) *H {
	t.Helper()
	h := startWithoutLoop(t, script, opts...)
	startLoop(t, h, adjust)
	return h
}

// startWithoutLoop is Start with every service but the loop.
func startWithoutLoop(t *testing.T, script scripted.Script, opts ...Option) *H {
	t.Helper()
	withoutLoop := func(_ *config.Config, o *app.Options) {
		o.Services = slices.DeleteFunc(slices.Clone(service.Names), func(n string) bool { return n == "loop" })
	}
	return Start(t, script, append(opts, withoutLoop)...)
}

// startLoop starts a loop on h's bus, configured from h's configuration
// and adjusted by adjust (nil: as is); it is shut down when the test ends.
func startLoop(t *testing.T, h *H, adjust func(*loop.Config)) *loop.Service {
	t.Helper()
	cfg := loop.ConfigFrom(h.Config)
	if adjust != nil {
		adjust(&cfg)
	}
	svc, err := loop.New(cfg, service.Deps{NC: h.NC, JS: h.JS, Log: heraldtest.Logger(t), Config: h.Config, Instance: "test"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { stopLoop(t, svc) })
	return svc
}

func stopLoop(t *testing.T, svc *loop.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, svc.Shutdown(ctx))
}

// testClock is a clock the test moves forward by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
