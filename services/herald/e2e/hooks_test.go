package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// plugin is a hook listener on its own connection, as a plugin process
// would be: it records what it is sent and answers with reply (nil: silent).
type plugin struct {
	mu   sync.Mutex
	seen []map[string]any
}

func listen(t *testing.T, h *H, subject string, reply func(map[string]any) []byte) *plugin {
	t.Helper()
	nc, err := h.App.Server.Connect("plugin")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	p := &plugin{}
	_, err = nc.Subscribe(subject, func(m *nats.Msg) {
		var v map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &v), string(m.Data))
		p.mu.Lock()
		p.seen = append(p.seen, v)
		p.mu.Unlock()
		if reply != nil {
			if r := reply(v); r != nil {
				_ = m.Respond(r)
			}
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return p
}

func (p *plugin) got() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.seen...)
}

func TestOnSessionStartHookFiresOncePerSession(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Text("hello")))
	p := listen(t, h, bus.HookOnSessionStart(), nil)
	task := NewTask("say hello")
	task.Tenant = "acme"
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	next := task
	next.TaskID, next.Prompt = "t-second", "again"
	require.Equal(t, proto.ExitTextResponse, h.Run(next).ExitReason)

	require.Eventually(t, func() bool { return len(p.got()) >= 1 }, 5*time.Second, 10*time.Millisecond)
	ev := p.got()[0]
	require.Equal(t, map[string]any{"session_id": task.SessionID, "task_id": task.TaskID, "tenant": "acme",
		"model": "test-model", "prompt": "say hello"}, ev)
	require.Len(t, p.got(), 1, "a second turn of the session is not a session start")
}

func TestPreLLMCallContextIsFencedIntoEachCallAndNeverPersisted(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("write_file", `{"path":"a.txt","content":"a"}`),
		scripted.Text("done")))
	p := listen(t, h, bus.HookPreLLMCall(), func(req map[string]any) []byte {
		return []byte(`{"context": "Deploys are frozen until Friday (step ` + jsonNumber(req["step"]) + `)."}`)
	})
	task := NewTask("write a.txt")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)

	asked := p.got()
	require.Len(t, asked, 2, "one request per model call")
	for i, req := range asked {
		require.Equal(t, task.SessionID, req["session_id"])
		require.Equal(t, task.TaskID, req["task_id"])
		require.EqualValues(t, 1, req["turn"])
		require.EqualValues(t, i+1, req["step"])
		require.Equal(t, "write a.txt", req["user_message"])
	}
	reqs := h.Model.Requests()
	require.Len(t, reqs, 2)
	for i, r := range reqs {
		var user scripted.Message
		for _, m := range r.Messages {
			if m.Role == "user" {
				user = m
			}
		}
		require.Contains(t, user.Text(), "<memory-context>")
		require.Contains(t, user.Text(), "Deploys are frozen until Friday (step "+string(rune('1'+i))+").")
		require.True(t, strings.HasSuffix(user.Text(), task.Prompt), "the user's own words come after the fence")
	}
	for _, m := range h.Transcript(task.SessionID) {
		require.NotContains(t, m.Content, "Deploys are frozen", "plugin context is never persisted")
	}
}

func jsonNumber(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

func TestPreLLMCallBadOrMissingRepliesAddNothing(t *testing.T) {
	for name, reply := range map[string]string{"not json": "context: yes", "wrong shape": `{"context": 42}`, "no context": `{}`} {
		t.Run(name, func(t *testing.T) {
			h := Start(t, scripted.Conversation(scripted.Text("ok")))
			listen(t, h, bus.HookPreLLMCall(), func(map[string]any) []byte { return []byte(reply) })
			task := NewTask("plain question")
			require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
			require.Equal(t, task.Prompt, h.RequestsOf(task.Prompt)[0].LastMessage().Text())
		})
	}
}

func TestAPIRequestHooksPairEveryProviderAttempt(t *testing.T) {
	h := Start(t, scripted.FailFirst(1, scripted.Reply{Status: 500, Body: `{"error":{"message":"boom"}}`},
		scripted.Conversation(scripted.Tool("read_file", `{"path":"missing.txt"}`), scripted.Text("done"))))
	pre := listen(t, h, bus.HookPreAPIRequest(), nil)
	post := listen(t, h, bus.HookPostAPIRequest(), nil)
	task := NewTask("read missing.txt")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)

	// Two steps, each failing once first: four attempts.
	require.Eventually(t, func() bool { return len(pre.got()) == 4 && len(post.got()) == 4 }, 5*time.Second, 10*time.Millisecond)
	for i := range 4 {
		b, a := pre.got()[i], post.got()[i]
		require.Equal(t, b["request_id"], a["request_id"], "pre and post of one attempt share its id")
		require.Equal(t, task.SessionID, b["session_id"])
		require.Equal(t, "openai", b["provider"])
		require.Equal(t, "test-model", b["model"])
		require.Equal(t, b["attempt"], a["attempt"])
		require.EqualValues(t, 1, b["turn"], "one turn for the whole turn's calls")
		require.EqualValues(t, i/2+1, b["step"])
		usage, ok := a["usage"].(map[string]any)
		require.True(t, ok, "post carries a usage object: %v", a)
		for _, k := range []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"} {
			require.Contains(t, usage, k)
		}
		require.Contains(t, a, "latency_ms")
		if i%2 == 0 {
			require.Equal(t, "error", a["status"])
			require.Equal(t, "server_error", a["error_class"])
			require.EqualValues(t, 0, a["cost_usd"])
		} else {
			require.Equal(t, "ok", a["status"])
			require.Positive(t, usage["input_tokens"])
			require.Positive(t, a["cost_usd"])
		}
	}
	require.NotEqual(t, pre.got()[0]["request_id"], pre.got()[1]["request_id"])
}

func TestPreToolCallPolicyRefusesTheModelsCall(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("write_file", `{"path":"secret.txt","content":"x"}`),
		scripted.Text("could not write")))
	p := listen(t, h, bus.HookPreToolCall(), func(req map[string]any) []byte {
		return []byte(`{"allow": false, "reason": "acme policy: no writes on Fridays"}`)
	})
	task := NewTask("write secret.txt")
	task.Tenant = "acme"
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	require.NoFileExists(t, filepath.Join(h.Workspace, "secret.txt"))

	asked := p.got()[0]
	require.Equal(t, "write_file", asked["tool"])
	require.Equal(t, "acme", asked["tenant"])
	require.Equal(t, map[string]any{"path": "secret.txt", "content": "x"}, asked["arguments"])
	reqs := h.RequestsOf(task.Prompt)
	require.Equal(t, "acme policy: no writes on Fridays", reqs[1].LastMessage().Text(), "the reason is the tool result")
	finished := h.EventsOfType(task.SessionID, proto.EventToolFinished)
	require.Len(t, finished, 1)
	require.Equal(t, "denied", finished[0].Status)
}

func TestPreToolCallRequiredRefusesEveryCallWithoutAPolicy(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("terminal", `{"command":"touch made.txt"}`),
		scripted.Text("blocked")), WithConfig(func(c *config.Config) { c.Hooks.PreToolCall = config.HookRequired }))
	task := NewTask("make a file")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	require.NoFileExists(t, filepath.Join(h.Workspace, "made.txt"))
	result := h.RequestsOf(task.Prompt)[1].LastMessage().Text()
	require.Contains(t, result, "hooks.pre_tool_call is required and no policy service answered within 250ms")
}

// A step whose only calls are execute_code gives its iteration back: three
// such steps fit in a budget of two, and every model call still counts.
func TestExecuteCodeStepGivesItsIterationBack(t *testing.T) {
	program := func(n string) scripted.Reply {
		return scripted.Tool("execute_code", `{"code":"from herald_tools import write_file\nwrite_file(path='n.txt', content='`+n+`')\nprint('ok `+n+`')"}`)
	}
	h := Start(t, scripted.Conversation(program("1"), program("2"), program("3"), scripted.Text("all done")))
	task := taskWith("do it in code", 2)
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	require.Equal(t, "all done", res.FinalResponse)
	require.Equal(t, 4, res.APICalls)
	data, err := os.ReadFile(filepath.Join(h.Workspace, "n.txt"))
	require.NoError(t, err)
	require.Equal(t, "3", string(data))
	require.Equal(t, "ok 1\n", h.RequestsOf(task.Prompt)[1].LastMessage().Text())

	// Any other tool spends the budget as before.
	h.Model.SetScript(scripted.Conversation(
		scripted.Tool("write_file", `{"path":"n.txt","content":"1"}`), scripted.Tool("write_file", `{"path":"n.txt","content":"2"}`),
		scripted.Tool("write_file", `{"path":"n.txt","content":"3"}`), scripted.Text("all done")))
	other := taskWith("do it by hand", 2)
	require.Equal(t, proto.ExitMaxIterations, h.Run(other).ExitReason)
}

func TestPreToolCallCoversTheMemoryServicesTools(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("memory", `{"action":"add","target":"user","content":"likes tabs"}`),
		scripted.Text("noted")))
	p := listen(t, h, bus.HookPreToolCall(), func(req map[string]any) []byte {
		return []byte(`{"allow": false, "reason": "memory is read-only for this tenant"}`)
	})
	task := NewTask("remember that I like tabs")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	require.Equal(t, "memory", p.got()[0]["tool"])
	require.Equal(t, "memory is read-only for this tenant", h.RequestsOf(task.Prompt)[1].LastMessage().Text())
	require.Eventually(t, func() bool {
		finished := h.EventsOfType(task.SessionID, proto.EventToolFinished)
		return len(finished) == 1 && finished[0].Status == "denied"
	}, 5*time.Second, 10*time.Millisecond)
}

func TestPreToolCallCoversDelegateTask(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("delegate_task", `{"goal":"count the files in the workspace"}`),
		scripted.Text("did it myself")))
	p := listen(t, h, bus.HookPreToolCall(), func(req map[string]any) []byte {
		return []byte(`{"allow": false, "reason": "no subagents on the free plan"}`)
	})
	task := NewTask("count the files, with help")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	asked := p.got()[0]
	require.Equal(t, "delegate_task", asked["tool"])
	require.Equal(t, map[string]any{"goal": "count the files in the workspace"}, asked["arguments"])
	require.Equal(t, "no subagents on the free plan", h.RequestsOf(task.Prompt)[1].LastMessage().Text())
	require.Empty(t, h.RequestsOf("count the files in the workspace"), "no child session was started")
	require.Len(t, h.Model.Requests(), 2)
}

// Through the whole system into ClickHouse: an execute_code program's calls
// are rows of tool_events attributed to the session, the one the policy
// refused with status denied.
func TestExecuteCodeCallsAreToolEventRowsInClickHouse(t *testing.T) {
	program := `{"code":"from herald_tools import write_file, read_file, ToolError\ntry:\n    write_file(path='x.txt', content='x')\nexcept ToolError as e:\n    print('refused:', e)\nprint(read_file(path='seed.txt'))"}`
	dsn := freshClickHouse(t)
	h := Start(t, scripted.Conversation(scripted.Tool("execute_code", program), scripted.Text("done")),
		func(c *config.Config, _ *app.Options) { c.ClickHouseDSN = dsn })
	require.NoError(t, os.WriteFile(filepath.Join(h.Workspace, "seed.txt"), []byte("seed line\n"), 0o644))
	listen(t, h, bus.HookPreToolCall(), func(req map[string]any) []byte {
		if req["tool"] == "write_file" {
			return []byte(`{"allow": false, "reason": "read-only session"}`)
		}
		return []byte(`{"allow": true}`)
	})
	task := NewTask("inspect with code")
	task.Tenant = "acme"
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	printed := h.RequestsOf(task.Prompt)[1].LastMessage().Text()
	require.Contains(t, printed, "refused: read-only session")
	require.Contains(t, printed, "seed line")

	conn := openClickHouse(t, dsn)
	type row struct{ tool, status, tenant string }
	var rows []row
	require.Eventually(t, func() bool {
		rs, err := conn.Query(context.Background(), "SELECT tool, status, tenant FROM tool_events WHERE session_id = ? ORDER BY tool", task.SessionID)
		if err != nil {
			return false
		}
		defer rs.Close()
		rows = nil
		for rs.Next() {
			var r row
			if rs.Scan(&r.tool, &r.status, &r.tenant) == nil {
				rows = append(rows, r)
			}
		}
		return len(rows) == 3
	}, 30*time.Second, 100*time.Millisecond, "three tool_events rows: the program and its two calls")
	require.Equal(t, []row{{"execute_code", "ok", "acme"}, {"read_file", "ok", "acme"}, {"write_file", "denied", "acme"}}, rows)
}

// A plugin that never answers in time costs each call at most
// hooks.timeout_ms: the turn goes on without its context or its verdict.
func TestSilentPluginsNeverStallATurn(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Tool("write_file", `{"path":"a.txt","content":"a"}`), scripted.Text("done")),
		WithConfig(func(c *config.Config) { c.Hooks.TimeoutMS = 50 }))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hold := func(map[string]any) []byte { <-release; return []byte(`{"allow": false, "context": "too late"}`) }
	llm := listen(t, h, bus.HookPreLLMCall(), hold)
	tools := listen(t, h, bus.HookPreToolCall(), hold)
	task := NewTask("write a.txt despite slow plugins")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	require.FileExists(t, filepath.Join(h.Workspace, "a.txt"), "no verdict in time allows the call")
	for _, r := range h.Model.Requests() {
		require.NotContains(t, r.LastMessage().Text(), "too late")
	}
	require.Len(t, llm.got(), 1, "the plugin takes one request at a time and still holds the first")
	require.Len(t, tools.got(), 1)
}
