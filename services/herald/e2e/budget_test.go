package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// `herald budgets` as a user runs it on a laptop: two runs of `herald run`
// spend $2 of the default tenant's $1.50 day; the third ends
// budget_exhausted naming the day; `herald budgets` then shows the window
// used up and every threshold alerted, in text and in JSON.
func TestHeraldBudgetsShowsSpendAgainstEveryWindow(t *testing.T) {
	model, err := scripted.Start(dollarCalls)
	require.NoError(t, err)
	defer model.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "herald.yaml"), `
pricing: {m: {input: 1, output: 2}}
budgets:
  tenants: {default: {daily: 1.5, monthly: 100}}
  keys: {key_ci: {monthly: 5}}
`)
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m", "HERALD_DATA_DIR": filepath.Join(dir, "data")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	herald := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		cmd := heraldCmd(t, ctx, dir, env, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	for range 2 {
		_, stderr, err := herald("run", "--json", "spend a dollar")
		require.NoError(t, err, stderr)
	}
	stdout, _, err := herald("run", "--json", "spend another")
	var res proto.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
	require.Equal(t, proto.ExitBudgetExhausted, res.ExitReason, "exit: %v", err)
	day := time.Now().UTC().Format("2006-01-02")
	require.Contains(t, res.Error, `tenant "default" daily window `+day+` ($1.5000) is used up`)

	stdout, stderr, err := herald("budgets", "--json")
	require.NoError(t, err, stderr)
	var report []struct {
		Scope, ID, Window, Period string
		SpentUSD                  float64 `json:"spent_usd"`
		LimitUSD                  float64 `json:"limit_usd"`
		Percent                   float64
		Alerted                   []float64
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &report), stdout)
	require.Len(t, report, 3, stdout)
	byWindow := map[string]int{}
	for i, r := range report {
		byWindow[r.Scope+"/"+r.ID+"/"+r.Window] = i
	}
	daily := report[byWindow["tenant/default/daily"]]
	require.Equal(t, day, daily.Period)
	require.InDelta(t, 2.0, daily.SpentUSD, 0.001)
	require.Equal(t, 1.5, daily.LimitUSD)
	require.Equal(t, []float64{50, 75, 90, 100}, daily.Alerted)
	monthly := report[byWindow["tenant/default/monthly"]]
	require.InDelta(t, 2.0, monthly.SpentUSD, 0.001)
	require.Empty(t, monthly.Alerted)
	key := report[byWindow["key/key_ci/monthly"]]
	require.Zero(t, key.SpentUSD)

	stdout, stderr, err = herald("budgets")
	require.NoError(t, err, stderr)
	// a malformed budget stops every command with the setting named
	writeFile(t, filepath.Join(dir, "herald.yaml"), "budgets: {tenants: {default: {dayly: 1.5}}}\n")
	for _, args := range [][]string{{"budgets"}, {"run", "spend a dollar"}} {
		cmd := heraldCmd(t, ctx, dir, env, args...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v: %s", args, out)
		require.Equal(t, 2, exit.ExitCode(), "%v: %s", args, out)
		require.Contains(t, string(out), `"dayly" is not a budget window (total, daily, monthly)`, "%v", args)
	}
	require.Len(t, model.Requests(), 2, "two runs called the model; the third was refused by the window, the last by the malformed budget")
	writeFile(t, filepath.Join(dir, "herald.yaml"), "budgets: {tenants: {default: {daily: 1.5}}}\n")

	require.Regexp(t, `tenant\s+default\s+daily\s+`+day+`\s+\$2\.\d{4}\s+\$0\.0000\s+\$1\.5000\s+13\d\.\d%\s+50% 75% 90% 100%`, stdout)
}

// A subagent's calls are charged where its parent's are: the parent's API
// key window holds the parent's two calls and the child's one.
func TestASubagentsCallsCountInItsParentsKeyWindow(t *testing.T) {
	dollar := func(r scripted.Reply) scripted.Reply {
		r.Usage = &scripted.Usage{PromptTokens: 1_000_000}
		return r
	}
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		switch {
		case strings.HasPrefix(r.FirstUser(), "parent: delegate") && r.AssistantCount() == 0:
			return dollar(scripted.Tool("delegate_task", `{"goal":"child: count to three"}`))
		case strings.HasPrefix(r.FirstUser(), "parent: delegate"):
			return dollar(scripted.Text("parent done"))
		}
		return dollar(scripted.Text("one two three"))
	}, withBudgets(config.Budgets{Keys: map[string]config.BudgetLimits{"key_sub": {Monthly: 100}}}))
	task := NewTask("parent: delegate the counting")
	task.APIKeyID = "key_sub"
	h.submitOn(bus.TenantAPITasks("beta"), task)
	res := h.WaitResult(task, 60*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	require.Len(t, h.Model.Requests(), 3)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := h.JS.KeyValue(ctx, bus.BucketSpend)
	require.NoError(t, err)
	e, err := kv.Get(ctx, "key.key_sub.monthly."+time.Now().UTC().Format("2006-01"))
	require.NoError(t, err)
	require.Equal(t, "3000000000", string(e.Value()), "the parent's two calls and the child's one, $1 each")
}

// The demonstration with the binary as operators run it: a loop
// process and two gateway processes (`herald serve`), 50 sessions of one
// tenant submitted at once against a $0.10 day. The runs that got in end
// text_response, the rest budget_exhausted naming the day; what they spent
// together stays within the cap plus one call; each threshold is alerted
// once across both gateways.
func TestFiftySessionsAgainstADailyCapThroughTwoGatewayProcesses(t *testing.T) {
	const sessions = 50
	model, err := scripted.Start(func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Content: "done", Usage: &scripted.Usage{PromptTokens: 5_000, CompletionTokens: 100}, Delay: 50 * time.Millisecond}
	})
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "herald.yaml")
	writeFile(t, cfgPath, "pricing: {m: {input: 1, output: 2}}\nbudgets: {tenants: {acme: {daily: 0.10}}}\n")
	c := startCluster(t, map[string]string{"HERALD_CONFIG": cfgPath, "HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"HERALD_API_KEY": "test", "HERALD_SANDBOX": "none", "HERALD_WORKSPACE": filepath.Join(dir, "workspace"),
		"HERALD_DATA_DIR": filepath.Join(dir, "data")})
	c.serve("loop", "toolrunner", "memory", "compressor")
	c.serve("gateway")
	c.serve("gateway")

	tasks := make([]proto.Task, sessions)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range tasks {
		tasks[i] = NewTask(fmt.Sprintf("acme session %d", i))
		require.NoError(t, bus.PublishJSON(ctx, c.JS, bus.TenantTasks("acme"), "", tasks[i]))
	}
	day := time.Now().UTC().Format("2006-01-02")
	var spent float64
	exits := map[string]int{}
	for _, task := range tasks {
		res := waitResult(t, c, task, 120*time.Second)
		exits[res.ExitReason]++
		spent += res.CostUSD
		if res.ExitReason == proto.ExitBudgetExhausted {
			require.Contains(t, res.Error, `tenant "acme" daily window `+day+` ($0.1000) is used up`)
		} else {
			require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
		}
	}
	const callUSD = 0.0052 // 5,000 input tokens at $1/M and 100 output at $2/M
	t.Logf("exits %v; spent $%.4f of a $0.10 day: overspend $%.4f (at most the calls in flight; one call is $%.4f)",
		exits, spent, spent-0.10, callUSD)
	require.Equal(t, sessions, exits[proto.ExitTextResponse]+exits[proto.ExitBudgetExhausted])
	require.Positive(t, exits[proto.ExitBudgetExhausted], "the cap stopped some runs")
	require.GreaterOrEqual(t, spent, 0.10, "the day was used, not refused early")
	require.LessOrEqual(t, spent, 0.10+callUSD+1e-9, "at most one call over: each call's hold covered its cost")

	var thresholds []float64
	require.Eventually(t, func() bool {
		thresholds = nil
		s, err := c.JS.Stream(ctx, bus.StreamAlerts)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			require.NoError(t, err)
			var a proto.BudgetAlert
			require.NoError(t, json.Unmarshal(m.Data, &a))
			require.Equal(t, "acme", a.Tenant)
			thresholds = append(thresholds, a.Threshold)
		}
		return len(thresholds) >= 4
	}, 10*time.Second, 50*time.Millisecond)
	slices.Sort(thresholds)
	require.Equal(t, []float64{50, 75, 90, 100}, thresholds, "each threshold once across both gateway processes")
}
