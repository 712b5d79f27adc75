package deploytest

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// heard is what a plugin connected as the plugins user received.
type heard struct {
	mu       sync.Mutex
	subjects map[string]int
	answered atomic.Int32
}

func (h *heard) has(subject string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subjects[subject] > 0
}

// hookPlugin connects as plugins, listens on herald.hooks.> and answers
// every request: allow for pre_tool_call, no context for pre_llm_call.
func hookPlugin(t *testing.T, s *secured) *heard {
	t.Helper()
	p := s.connect(t, "plugins")
	h := &heard{subjects: map[string]int{}}
	_, err := p.nc.Subscribe("herald.hooks.>", func(m *nats.Msg) {
		h.mu.Lock()
		h.subjects[m.Subject]++
		h.mu.Unlock()
		if m.Reply == "" {
			return
		}
		reply := `{"allow": true}`
		if m.Subject == bus.HookPreLLMCall() {
			reply = `{"context": ""}`
		}
		if m.Respond([]byte(reply)) == nil {
			h.answered.Add(1)
		}
	})
	require.NoError(t, err)
	require.NoError(t, p.nc.Flush())
	return h
}

// TestPluginsUserHearsHooksAndAnswersThemOnly: the plugins user receives
// each hook from the service that sends it and can answer requests, but can
// publish nothing of its own, read nothing but herald.hooks.>, and no other
// user may listen on the hooks (a tool runner must not play policy engine).
func TestPluginsUserHearsHooksAndAnswersThemOnly(t *testing.T) {
	s := startSecured(t)
	h := hookPlugin(t, s)

	requests := map[string][]string{"loop": {bus.HookPreLLMCall()}, "toolrunner": {bus.HookPreToolCall()}, "memory": {bus.HookPreToolCall()}}
	for user, subjects := range requests {
		c := s.connect(t, user)
		for _, subj := range subjects {
			m, err := c.nc.Request(subj, []byte(`{"session_id":"s1"}`), 2*time.Second)
			require.NoError(t, err, "%s asks %s and the plugin answers; server refused: %v", user, subj, s.violations())
			require.NotEmpty(t, m.Data)
		}
	}
	events := map[string][]string{"loop": {bus.HookOnSessionStart()}, "gateway": {bus.HookPreAPIRequest(), bus.HookPostAPIRequest()}}
	for user, subjects := range events {
		c := s.connect(t, user)
		for _, subj := range subjects {
			require.NoError(t, c.nc.Publish(subj, []byte(`{"session_id":"s1"}`)))
			require.NoError(t, c.nc.Flush())
			require.Eventually(t, func() bool { return h.has(subj) }, 5*time.Second, 10*time.Millisecond, "the plugin hears %s from %s", subj, user)
		}
	}
	require.Empty(t, s.violations(), "the services may send the hooks they use")

	p := s.connect(t, "plugins")
	for _, subj := range []string{bus.TasksSubject, bus.HookPreToolCall(), bus.HookOnSessionStart(), "herald.tool.result.s1.c1",
		"herald.session.s1.events", "herald.session.s1.input", "_INBOX_toolrunner.forged", "$JS.API.STREAM.INFO.TOOL_CALLS", "$KV.herald_sessions.s1"} {
		require.NoError(t, p.nc.Publish(subj, []byte(`{"allow": true}`)))
		p.requireDenied("publish", subj)
	}
	for _, subj := range []string{"herald.session.*.events", bus.TasksSubject, "herald.tool.call.>", "_INBOX.>", "_INBOX_toolrunner.>", ">"} {
		_, err := p.nc.SubscribeSync(subj)
		require.NoError(t, err)
		p.requireDenied("subscription", subj)
	}
	for _, user := range append([]string{"client"}, serviceUsers...) {
		c := s.connect(t, user)
		_, err := c.nc.SubscribeSync(bus.HookPreToolCall())
		require.NoError(t, err)
		c.requireDenied("subscription", bus.HookPreToolCall())
	}
	require.NotContains(t, strings.Join(s.violations(), "\n"), `"herald.hooks.>"`, "the plugin's own subscription was never refused")
}
