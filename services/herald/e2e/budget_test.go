package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// dollarCalls answers every call with a million input tokens: $1 at the
// harness's test-model price.
func dollarCalls(*scripted.Request) scripted.Reply {
	return scripted.Reply{Content: "done", Usage: &scripted.Usage{PromptTokens: 1_000_000, CompletionTokens: 1}}
}

func withBudgets(b config.Budgets) Option {
	return WithConfig(func(c *config.Config) { c.Budgets = b })
}

// A run stopped by a budget window ends budget_exhausted, and its error
// names the window: a tenant's day, an API key's month, a schedule's day.
func TestABudgetWindowEndsTheRunBudgetExhaustedNamingIt(t *testing.T) {
	h := Start(t, dollarCalls, withBudgets(config.Budgets{
		Tenants:   map[string]config.BudgetLimits{"acme": {Daily: 1.5}},
		Keys:      map[string]config.BudgetLimits{"key_ci": {Monthly: 0.5}},
		Schedules: map[string]config.BudgetLimits{"sch_nightly": {Daily: 0.5}},
	}))
	run := func(subject string, task proto.Task) proto.Result {
		h.submitOn(subject, task)
		return h.WaitResult(task, 60*time.Second)
	}
	for i := range 2 {
		res := run(bus.TenantTasks("acme"), NewTask("acme's work"))
		require.Equal(t, proto.ExitTextResponse, res.ExitReason, "run %d: $%v spent of $1.50", i, res.CostUSD)
	}
	res := run(bus.TenantTasks("acme"), NewTask("acme's third"))
	require.Equal(t, proto.ExitBudgetExhausted, res.ExitReason)
	require.Contains(t, res.Error, `tenant "acme" daily window `+time.Now().UTC().Format("2006-01-02"))
	require.Contains(t, res.Error, "($1.5000) is used up: $2.0000 spent")

	keyed := func(prompt string) proto.Task {
		task := NewTask(prompt)
		task.APIKeyID = "key_ci"
		return task
	}
	require.Equal(t, proto.ExitTextResponse, run(bus.TenantAPITasks("beta"), keyed("beta's keyed work")).ExitReason)
	res = run(bus.TenantAPITasks("beta"), keyed("beta's keyed work again"))
	require.Equal(t, proto.ExitBudgetExhausted, res.ExitReason)
	require.Contains(t, res.Error, `key "key_ci" monthly window `+time.Now().UTC().Format("2006-01"))
	require.Equal(t, proto.ExitTextResponse, run(bus.TenantAPITasks("beta"), NewTask("beta without the key")).ExitReason,
		"the key's window caps the key, not its tenant")

	fired := func(prompt string) proto.Task {
		task := NewTask(prompt)
		task.ScheduleID = "sch_nightly"
		return task
	}
	require.Equal(t, proto.ExitTextResponse, run(bus.APITasksSubject, fired("nightly report")).ExitReason)
	res = run(bus.APITasksSubject, fired("nightly report again"))
	require.Equal(t, proto.ExitBudgetExhausted, res.ExitReason)
	require.Contains(t, res.Error, `schedule "sch_nightly" daily window`)
}

// The attack: a task publisher (a tenant's front end, a client) names
// another's API key or schedule so that its work is charged to that budget
// (or escapes its own). Both fields are refused on every public task
// subject, dead-lettered with the reason, and the victim's windows are
// untouched.
func TestATaskPublisherCannotChargeAnothersKeyOrSchedule(t *testing.T) {
	h := Start(t, dollarCalls, withBudgets(config.Budgets{
		Keys:      map[string]config.BudgetLimits{"key_victim": {Daily: 100}},
		Schedules: map[string]config.BudgetLimits{"sch_victim": {Daily: 100}},
	}))
	forged := map[string]proto.Task{}
	for _, subject := range []string{bus.TasksSubject, bus.TenantTasks("acme")} {
		for _, field := range []string{"api_key_id", "schedule_id"} {
			task := NewTask("forged " + field + " on " + subject)
			if field == "api_key_id" {
				task.APIKeyID = "key_victim"
			} else {
				task.ScheduleID = "sch_victim"
			}
			h.submitOn(subject, task)
			forged[task.TaskID] = task
		}
	}
	after := NewTask("an honest task after them")
	h.submitOn(bus.TenantTasks("acme"), after)
	require.Equal(t, proto.ExitTextResponse, h.WaitResult(after, 60*time.Second).ExitReason)

	reasons := map[string]string{}
	require.Eventually(t, func() bool {
		for _, m := range heraldtest.DeadLetters(t, h.JS, bus.StreamTasks) {
			var task proto.Task
			require.NoError(t, json.Unmarshal(m.Data, &task))
			reasons[task.TaskID] = m.Header.Get(bus.HeaderError)
		}
		return len(reasons) == len(forged)
	}, 10*time.Second, 20*time.Millisecond, "dead-lettered: %v", reasons)
	for id, task := range forged {
		require.Contains(t, reasons[id], "is set only by Herald's api service", task.Prompt)
		require.Empty(t, h.RequestsOf(task.Prompt), "a forged task reached the model")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := h.JS.KeyValue(ctx, bus.BucketSpend)
	require.NoError(t, err)
	day := time.Now().UTC().Format("2006-01-02")
	for _, key := range []string{"key.key_victim.daily." + day, "schedule.sch_victim.daily." + day} {
		_, err := kv.Get(ctx, key)
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound, "nothing was charged to %s", key)
	}
}
