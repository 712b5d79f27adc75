package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// inFlight is a model double that answers every request "done" after
// delay (the model's latency) and records the most requests of prompts
// starting with prefix it was ever answering at once.
type inFlight struct {
	mu        sync.Mutex
	now, most int
}

func (f *inFlight) script(prefix string, delay time.Duration) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		if !strings.HasPrefix(r.FirstUser(), prefix) {
			return scripted.Reply{Content: "done", Delay: delay}
		}
		f.mu.Lock()
		f.now++
		f.most = max(f.most, f.now)
		f.mu.Unlock()
		// in flight for the model's latency, until the answer is sent
		return scripted.Reply{Content: "done", Delay: delay, Done: func() {
			f.mu.Lock()
			f.now--
			f.mu.Unlock()
		}}
	}
}

func (f *inFlight) max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.most
}

// positionsOf lists the positions a session's queued events told.
func positionsOf(evs []proto.Event) []int {
	var out []int
	for _, ev := range evs {
		out = append(out, ev.Position)
	}
	return out
}

// firstRequestIndex is when (the how-manieth request) the model first
// heard of prompt; -1 for never.
func (h *H) firstRequestIndex(prompt string) int {
	for i, r := range h.Model.Requests() {
		if r.FirstUser() == prompt {
			return i
		}
	}
	return -1
}

// A tenant at its max_concurrent_sessions sees its extra sessions queued,
// told their positions as they move up, and started in order; another
// tenant is not held back; nothing fails.
func TestSessionsBeyondATenantsLimitWaitInOrderAndSaySo(t *testing.T) {
	var acme inFlight
	h := Start(t, acme.script("acme", 300*time.Millisecond), WithConfig(func(c *config.Config) {
		c.Tenants = map[string]config.TenantLimits{"acme": {MaxConcurrentSessions: 1}}
	}))
	var tasks []proto.Task
	for i := range 4 {
		task := NewTask(fmt.Sprintf("acme task %d", i))
		tasks = append(tasks, task)
		h.submitOn(bus.TenantTasks("acme"), task)
		if i == 0 {
			require.Eventually(t, func() bool { return h.firstRequestIndex(task.Prompt) >= 0 }, 10*time.Second, 5*time.Millisecond)
			continue
		}
		// published one after another, as a user would: each joins the queue behind the last
		require.Eventually(t, func() bool { return len(h.EventsOfType(task.SessionID, proto.EventQueued)) > 0 }, 10*time.Second, 5*time.Millisecond)
	}
	other := NewTask("globex task")
	h.submitOn(bus.TenantTasks("globex"), other)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(other, 30*time.Second).ExitReason)
	_, acmeLastDone := h.Result(tasks[3])
	require.False(t, acmeLastDone, "globex waited behind acme's queue")

	for _, task := range tasks {
		require.Equal(t, proto.ExitTextResponse, h.WaitResult(task, 30*time.Second).ExitReason)
	}
	require.Empty(t, h.EventsOfType(tasks[0].SessionID, proto.EventQueued))
	require.Equal(t, []int{1}, positionsOf(h.EventsOfType(tasks[1].SessionID, proto.EventQueued)))
	require.Equal(t, []int{2, 1}, positionsOf(h.EventsOfType(tasks[2].SessionID, proto.EventQueued)))
	require.Equal(t, []int{3, 2, 1}, positionsOf(h.EventsOfType(tasks[3].SessionID, proto.EventQueued)))
	for i := 1; i < 4; i++ {
		require.Greater(t, h.firstRequestIndex(tasks[i].Prompt), h.firstRequestIndex(tasks[i-1].Prompt),
			"task %d started before task %d", i, i-1)
	}
	require.Equal(t, 1, acme.max(), "the model never saw two of acme's sessions at once")
	require.Empty(t, heraldtest.DeadLetters(t, h.JS, bus.StreamTasks))
	// a turn gives its slot back once its record is committed, which is
	// after its result was published: wait for it rather than race it
	require.Eventually(t, func() bool {
		held, err := bus.NewSlots(h.JS).Holders(context.Background(), bus.SessionsScope("acme"))
		return err == nil && len(held) == 0
	}, 10*time.Second, 10*time.Millisecond, "every turn gave its slot back")
}

// Two loop processes on one bus hold a tenant to one limit between them.
func TestATenantsSessionLimitHoldsAcrossProcesses(t *testing.T) {
	var acme inFlight
	script := acme.script("acme", 150*time.Millisecond)
	limits := WithConfig(func(c *config.Config) {
		c.Tenants = map[string]config.TenantLimits{"acme": {MaxConcurrentSessions: 2}}
	})
	port := freePort(t)
	h := Start(t, script, limits, func(_ *config.Config, o *app.Options) { o.Listen = fmt.Sprintf("127.0.0.1:%d", port) })
	// a second process with a loop of its own, on the first one's bus
	cfg := h.Config
	cfg.NATSURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	cfg.DataDir = filepath.Join(t.TempDir(), "second")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second, err := app.Start(ctx, app.Options{Config: cfg, Services: []string{"loop"}, Log: heraldtest.Logger(t), Instance: "second"})
	require.NoError(t, err)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		second.Shutdown(sctx)
	})
	var tasks []proto.Task
	for i := range 8 {
		task := NewTask(fmt.Sprintf("acme %d", i))
		tasks = append(tasks, task)
		h.submitOn(bus.TenantTasks("acme"), task)
	}
	for _, task := range tasks {
		require.Equal(t, proto.ExitTextResponse, h.WaitResult(task, 60*time.Second).ExitReason)
	}
	// each session makes one model call: calls in flight are sessions going
	require.Equal(t, 2, acme.max(), "two sessions at once, never more, across both processes")
}

// A tenant's model calls beyond max_concurrent_model_calls wait their turn:
// never more in flight at once, none failed.
func TestATenantsModelCallsWaitForItsLimit(t *testing.T) {
	var acme inFlight
	h := Start(t, acme.script("acme", 150*time.Millisecond), WithConfig(func(c *config.Config) {
		c.Tenants = map[string]config.TenantLimits{"acme": {MaxConcurrentModelCalls: 2}}
	}))
	var tasks []proto.Task
	for i := range 6 {
		task := NewTask(fmt.Sprintf("acme %d", i))
		tasks = append(tasks, task)
		h.submitOn(bus.TenantTasks("acme"), task)
	}
	for _, task := range tasks {
		require.Equal(t, proto.ExitTextResponse, h.WaitResult(task, 60*time.Second).ExitReason)
	}
	require.Equal(t, 2, acme.max(), "two model calls at once, never more")
	require.Empty(t, heraldtest.DeadLetters(t, h.JS, bus.StreamLLMRequests))
}

// A subagent runs within its parent's turn: a tenant at its session limit
// still gets its parent's delegate_task answered (made to wait for a slot,
// the child would wait for its own parent forever).
func TestSubagentsOfATenantAtItsSessionLimitAreNotQueued(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if r.FirstUser() == "acme parent" {
			if r.AssistantCount() == 0 {
				return scripted.Tool("delegate_task", `{"goal":"child part"}`)
			}
			return scripted.Text("parent done")
		}
		return scripted.Text("child done")
	}, WithConfig(func(c *config.Config) {
		c.Tenants = map[string]config.TenantLimits{"acme": {MaxConcurrentSessions: 1}}
	}))
	task := NewTask("acme parent")
	h.submitOn(bus.TenantTasks("acme"), task)
	res := h.WaitResult(task, 60*time.Second)
	require.Equal(t, "parent done", res.FinalResponse)
	require.Equal(t, []string{"child done"}, toolContents(h.Transcript(task.SessionID)))
}
