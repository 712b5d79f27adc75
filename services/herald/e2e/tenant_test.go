package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// submitOn publishes task on subject (herald.tasks.<tenant> or herald.tasks).
func (h *H) submitOn(subject string, task proto.Task) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(h.t, bus.PublishJSON(ctx, h.JS, subject, "", task))
}

// byPrompt answers each conversation from its own script, chosen by the
// first words of its prompt.
func byPrompt(scripts map[string]scripted.Script) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		for prefix, s := range scripts {
			if strings.HasPrefix(r.FirstUser(), prefix) {
				return s(r)
			}
		}
		return scripted.Text("no script for this prompt")
	}
}

func TestTenantSubjectBindsTheTaskToItsTenant(t *testing.T) {
	h := Start(t, byPrompt(map[string]scripted.Script{
		"acme": scripted.Conversation(scripted.Tool("terminal", `{"command":"pwd; echo acme > note.txt; ls .."}`), scripted.Text("noted")),
	}))
	tenantEvents := make(chan *nats.Msg, 256)
	sub, err := h.NC.ChanSubscribe("herald.tenant.acme.session.*.events", tenantEvents)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	task := NewTask("acme: write a note")
	task.Workspace = "proj"
	h.submitOn(bus.TenantTasks("acme"), task)
	res := h.WaitResult(task, 60*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.FinalResponse)

	// The workspace is the tenant's: <root>/tenants/acme/proj.
	note, err := os.ReadFile(filepath.Join(h.Workspace, "tenants", "acme", "proj", "note.txt"))
	require.NoError(t, err)
	require.Equal(t, "acme\n", string(note))
	tools := toolContents(h.Transcript(task.SessionID))
	require.Len(t, tools, 1)
	require.Contains(t, tools[0], filepath.Join(h.Workspace, "tenants", "acme", "proj"))

	// The result and the events are also on the tenant's own subjects.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := bus.LastOnSubject(ctx, h.JS, bus.StreamSessions, bus.TenantSessionResult("acme", task.SessionID))
	require.NoError(t, err)
	var mirrored proto.Result
	require.NoError(t, json.Unmarshal(raw.Data, &mirrored))
	require.Equal(t, res.FinalResponse, mirrored.FinalResponse)
	seen := map[string]bool{}
	require.Eventually(t, func() bool {
		for {
			select {
			case m := <-tenantEvents:
				var ev proto.Event
				require.NoError(t, json.Unmarshal(m.Data, &ev))
				require.Equal(t, task.SessionID, ev.SessionID)
				seen[ev.Type] = true
			default:
				return seen[proto.EventResult] && seen[proto.EventToolStarted] && seen[proto.EventToolFinished] && seen[proto.EventDelta]
			}
		}
	}, 10*time.Second, 20*time.Millisecond, "tenant events seen: %v", seen)
}

func TestTaskNamingAnotherTenantIsDeadLetteredAndNeverReachesAModel(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Text("hello")))
	owned := NewTask("acme: the first turn")
	h.submitOn(bus.TenantTasks("acme"), owned)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(owned, 60*time.Second).ExitReason)

	forged := NewTask("globex: charge this to acme")
	forged.Tenant = "acme"
	h.submitOn(bus.TenantTasks("globex"), forged)
	hijack := NewTask("globex: continue acme's session")
	hijack.SessionID = owned.SessionID
	h.submitOn(bus.TenantTasks("globex"), hijack)
	unbound := NewTask("reach into a tenant's folder")
	unbound.Workspace = "tenants/acme"
	h.submitOn(bus.TasksSubject, unbound)
	replay := NewTask("globex: pass for acme's task delivered again")
	replay.SessionID, replay.TaskID = owned.SessionID, owned.TaskID
	h.submitOn(bus.TenantTasks("globex"), replay)
	escape := NewTask("globex: climb out")
	escape.Workspace = "../acme"
	h.submitOn(bus.TenantTasks("globex"), escape)

	// A task after them still runs: the bad ones were dead-lettered, not stuck.
	after := NewTask("globex: hello")
	h.submitOn(bus.TenantTasks("globex"), after)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(after, 60*time.Second).ExitReason)

	reasons := map[string]string{}
	require.Eventually(t, func() bool {
		for _, m := range heraldtest.DeadLetters(t, h.JS, bus.StreamTasks) {
			var task proto.Task
			require.NoError(t, json.Unmarshal(m.Data, &task))
			reasons[task.TaskID] = m.Header.Get(bus.HeaderSubject) + " " + m.Header.Get(bus.HeaderError)
		}
		return len(reasons) == 5
	}, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, reasons[forged.TaskID], `herald.tasks.globex`)
	require.Contains(t, reasons[forged.TaskID], `its body names tenant "acme"`)
	require.Contains(t, reasons[hijack.TaskID], "belongs to another tenant")
	require.True(t, strings.HasPrefix(reasons[unbound.TaskID], "herald.tasks "), reasons[unbound.TaskID])
	require.Contains(t, reasons[unbound.TaskID], "tenants folder")
	require.Contains(t, reasons[escape.TaskID], "without '..'")
	require.Contains(t, reasons[owned.TaskID], "belongs to another tenant", "the replay was refused, not taken for acme's task delivered again")
	for _, task := range []proto.Task{forged, hijack, unbound, replay, escape} {
		require.Empty(t, h.RequestsOf(task.Prompt), "a refused task reached the model")
	}
	require.Len(t, h.Transcript(owned.SessionID), 3, "acme's session was not continued by globex")
}

func TestTenantsMemoryAndSessionSearchAreTheirOwn(t *testing.T) {
	h := Start(t, byPrompt(map[string]scripted.Script{
		"acme": scripted.Conversation(
			scripted.Tool("memory", `{"action":"add","target":"memory","content":"acme deploys on zanzibar-7"}`),
			scripted.Text("remembered zanzibar-7")),
		"globex": scripted.Conversation(
			scripted.Tool("memory", `{"action":"read","target":"memory"}`),
			scripted.Tool("session_search", `{"query":"zanzibar"}`),
			scripted.Text("nothing found")),
		"later acme": scripted.Conversation(
			scripted.Tool("session_search", `{"query":"zanzibar"}`),
			scripted.Text("found it")),
	}))
	acme := NewTask("acme: remember where we deploy")
	h.submitOn(bus.TenantTasks("acme"), acme)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(acme, 60*time.Second).ExitReason)

	globex := NewTask("globex: what do you know about zanzibar")
	h.submitOn(bus.TenantTasks("globex"), globex)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(globex, 60*time.Second).ExitReason)
	for _, content := range toolContents(h.Transcript(globex.SessionID)) {
		require.NotContains(t, content, "zanzibar-7", "globex saw acme's memory or transcript")
	}
	for _, r := range h.RequestsOf(globex.Prompt) {
		for _, m := range r.Messages {
			require.NotContains(t, m.Text(), "zanzibar-7", "acme's memory reached globex's prompt")
		}
	}

	// The same search by acme finds acme's own session: the search works.
	later := NewTask("later acme: where do we deploy")
	h.submitOn(bus.TenantTasks("acme"), later)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(later, 60*time.Second).ExitReason)
	found := toolContents(h.Transcript(later.SessionID))
	require.Len(t, found, 1)
	require.Contains(t, found[0], acme.SessionID)
}

func TestSubagentOfATenantSessionStaysInTheTenant(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		switch {
		case strings.HasPrefix(r.FirstUser(), "acme: delegate"):
			if r.AssistantCount() == 0 {
				return scripted.Tool("delegate_task", `{"goal":"child: write the report"}`)
			}
			return scripted.Text("the child wrote it")
		case strings.HasPrefix(r.FirstUser(), "child: write the report") && r.AssistantCount() == 0:
			return scripted.Tool("write_file", `{"path":"report.txt","content":"by the child"}`)
		}
		return scripted.Text("written")
	})
	task := NewTask("acme: delegate the report")
	task.Workspace = "proj"
	h.submitOn(bus.TenantTasks("acme"), task)
	res := h.WaitResult(task, 60*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.FinalResponse)
	report, err := os.ReadFile(filepath.Join(h.Workspace, "tenants", "acme", "proj", "report.txt"))
	require.NoError(t, err, "the child worked in its parent's tenant workspace")
	require.Equal(t, "by the child", string(report))
	require.NoFileExists(t, filepath.Join(h.Workspace, "proj", "report.txt"))
	require.Empty(t, heraldtest.DeadLetters(t, h.JS, bus.StreamTasks), "the child's task was accepted on the tenant's subject")
}

func TestTenantInterruptsAndAnswersOnlyItsOwnSessions(t *testing.T) {
	h := Start(t, byPrompt(map[string]scripted.Script{
		"acme: ask":  scripted.Conversation(scripted.Tool("clarify", `{"question":"Which region?"}`), scripted.Text("ok")),
		"acme: wait": scripted.Conversation(scripted.Tool("terminal", `{"command":"sleep 2; echo slept"}`), scripted.Text("woke up")),
		"acme: long": scripted.Conversation(scripted.Tool("terminal", `{"command":"sleep 30"}`), scripted.Text("never")),
	}), withConfig(func(c *config.Config) { c.Approvals.Mode = "off"; c.Approvals.Timeout = 20 * time.Second }))
	questions := make(chan *nats.Msg, 16)
	sub, err := h.NC.ChanSubscribe("herald.tenant.acme.session.*.events", questions)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	// acme answers its own session's question on its own subject; globex's
	// answer to the same question, on globex's subject, is not heard.
	ask := NewTask("acme: ask me")
	h.submitOn(bus.TenantTasks("acme"), ask)
	var q proto.Event
	require.Eventually(t, func() bool {
		select {
		case m := <-questions:
			return json.Unmarshal(m.Data, &q) == nil && q.Type == proto.EventClarify
		default:
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)
	for tenant, answer := range map[string]string{"globex": "globex-region", "acme": "eu-west"} {
		data, _ := json.Marshal(proto.Input{RequestID: q.RequestID, CallID: q.CallID, Answer: answer})
		require.NoError(t, h.NC.Publish(bus.TenantSessionInput(tenant, ask.SessionID), data))
		require.NoError(t, h.NC.Flush())
	}
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(ask, 30*time.Second).ExitReason)
	answered := toolContents(h.Transcript(ask.SessionID))
	require.Len(t, answered, 1)
	require.Contains(t, answered[0], "eu-west")
	require.NotContains(t, answered[0], "globex-region")

	// globex's interrupt of acme's session is dead-lettered; the turn goes on.
	wait := NewTask("acme: wait a little")
	h.submitOn(bus.TenantTasks("acme"), wait)
	require.Eventually(t, func() bool { return len(h.EventsOfType(wait.SessionID, proto.EventToolStarted)) > 0 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, h.NC.Publish(bus.TenantSessionInterrupt("globex", wait.SessionID), []byte(`{}`)))
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(wait, 30*time.Second).ExitReason, "a forged interrupt stopped acme's turn")
	require.Eventually(t, func() bool {
		for _, m := range heraldtest.DeadLetters(t, h.JS, bus.StreamControl) {
			if strings.Contains(m.Header.Get(bus.HeaderError), "not bound to it") {
				return m.Header.Get(bus.HeaderSubject) == bus.TenantSessionInterrupt("globex", wait.SessionID)
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)

	// acme's own interrupt stops its turn at once.
	long := NewTask("acme: long job")
	h.submitOn(bus.TenantTasks("acme"), long)
	require.Eventually(t, func() bool { return len(h.EventsOfType(long.SessionID, proto.EventToolStarted)) > 0 }, 10*time.Second, 5*time.Millisecond)
	start := time.Now()
	require.NoError(t, h.NC.Publish(bus.TenantSessionInterrupt("acme", long.SessionID), []byte(`{}`)))
	require.Equal(t, proto.ExitInterrupted, h.WaitResult(long, 5*time.Second).ExitReason)
	require.Less(t, time.Since(start), time.Second)
}

// A tenant with pools runs its tools only in them, by default in the first;
// a pool one tenant lists is closed to the others. Forged pools are
// dead-lettered with the reason and never reach a model or a runner.
func TestTenantPoolsKeepEachTenantsToolsInItsOwnPools(t *testing.T) {
	h := Start(t, byPrompt(map[string]scripted.Script{
		"acme": scripted.Conversation(scripted.Tool("terminal", `{"command":"echo acme > note.txt"}`), scripted.Text("noted")),
	}), WithConfig(func(c *config.Config) {
		c.Tenants = map[string]config.TenantLimits{"acme": {Pools: []string{"acme-pool"}}}
	}), func(_ *config.Config, o *app.Options) { o.Pool = "acme-pool" }) // the only runner serves acme's pool

	calls := make(chan *nats.Msg, 16)
	sub, err := h.NC.ChanSubscribe(bus.ToolCall("acme-pool", "*"), calls)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	owned := NewTask("acme: write a note")
	owned.Workspace = "proj"
	h.submitOn(bus.TenantTasks("acme"), owned)
	res := h.WaitResult(owned, 60*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.FinalResponse)
	require.Len(t, calls, 1, "acme's tool call went to its pool")
	note, err := os.ReadFile(filepath.Join(h.Workspace, "tenants", "acme", "proj", "note.txt"))
	require.NoError(t, err)
	require.Equal(t, "acme\n", string(note))

	intruder := NewTask("globex: run in acme's pool")
	intruder.Pool = "acme-pool"
	h.submitOn(bus.TenantTasks("globex"), intruder)
	strayed := NewTask("acme: run in the shared pool")
	strayed.Pool = bus.DefaultPool
	h.submitOn(bus.TenantTasks("acme"), strayed)

	reasons := map[string]string{}
	require.Eventually(t, func() bool {
		for _, m := range heraldtest.DeadLetters(t, h.JS, bus.StreamTasks) {
			var task proto.Task
			require.NoError(t, json.Unmarshal(m.Data, &task))
			reasons[task.TaskID] = m.Header.Get(bus.HeaderError)
		}
		return len(reasons) == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, reasons[intruder.TaskID], `pool "acme-pool" is reserved to tenant(s) [acme]`)
	require.Contains(t, reasons[strayed.TaskID], `pool "default" is not one of tenant "acme"'s`)
	for _, task := range []proto.Task{intruder, strayed} {
		require.Empty(t, h.RequestsOf(task.Prompt), "a task in a forbidden pool reached the model")
	}
	require.Len(t, calls, 1, "no other call reached acme's pool")
}
