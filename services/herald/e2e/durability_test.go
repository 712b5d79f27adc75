package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// durableScript is a five-step task whose terminal calls append to a file,
// so a tool call executed twice would show as an extra line. gate, when set,
// is called as the model receives the request for reply i.
func durableScript(gate func(i int)) scripted.Script {
	replies := []scripted.Reply{
		scripted.Tool("write_file", `{"path":"notes.txt","content":"one"}`),
		scripted.Tool("terminal", `{"command":"echo effect >> effects.log; sleep 0.5"}`),
		{ToolCalls: []scripted.Call{{Name: "read_file", Args: `{"path":"notes.txt"}`}}, Delay: 700 * time.Millisecond},
		scripted.Tool("terminal", `{"command":"echo effect >> effects.log"}`),
		scripted.Text("finished: the notes say one"),
	}
	return func(r *scripted.Request) scripted.Reply {
		i := min(r.AssistantCount(), len(replies)-1)
		if gate != nil {
			gate(i)
		}
		return replies[i]
	}
}

var wantRoles = []string{"system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"}

// checkUndisturbedOutcome asserts what an undisturbed run produces.
func checkUndisturbedOutcome(t *testing.T, c *cluster, workspace string, task proto.Task, res proto.Result) {
	t.Helper()
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "finished: the notes say one", res.FinalResponse)
	effects, err := os.ReadFile(filepath.Join(workspace, "effects.log"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(effects), "effect"), "each terminal call ran exactly once")
	var roles []string
	for _, e := range committedTranscript(t, c.JS, task.SessionID) {
		roles = append(roles, e.Message.Role)
	}
	require.Equal(t, wantRoles, roles, "no message lost or duplicated in the transcript")
}

func waitResult(t *testing.T, c *cluster, task proto.Task, timeout time.Duration) proto.Result {
	t.Helper()
	var res proto.Result
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		raw, err := bus.LastOnSubject(ctx, c.JS, bus.StreamSessions, bus.SessionResult(task.SessionID))
		if err != nil {
			return false
		}
		return json.Unmarshal(raw.Data, &res) == nil && res.TaskID == task.TaskID
	}, timeout, 50*time.Millisecond, "no result for %s", task.SessionID)
	return res
}

func submit(t *testing.T, c *cluster, task proto.Task) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, bus.PublishJSON(ctx, c.JS, bus.TasksSubject, "", task))
}

// onEvent calls f once for the first event matching match.
func onEvent(t *testing.T, c *cluster, sid string, match func(proto.Event) bool, f func()) {
	var once sync.Once
	sub, err := c.NC.Subscribe(bus.SessionEvents(sid), func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil && match(ev) {
			once.Do(func() { go f() })
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func TestLoopKilledAtAnyPointFinishesTheSessionOnce(t *testing.T) {
	points := []struct {
		name string
		arm  func(t *testing.T, c *cluster, sid string, gate *gateFn, kill func())
	}{
		{"waiting for the model", func(t *testing.T, c *cluster, sid string, gate *gateFn, kill func()) {
			gate.set(func(i int) {
				if i == 2 {
					go kill()
				}
			})
		}},
		{"waiting for a tool", func(t *testing.T, c *cluster, sid string, gate *gateFn, kill func()) {
			onEvent(t, c, sid, func(ev proto.Event) bool { return ev.Type == proto.EventToolStarted && ev.Tool == "terminal" }, kill)
		}},
		{"between a tool result and the next request", func(t *testing.T, c *cluster, sid string, gate *gateFn, kill func()) {
			onEvent(t, c, sid, func(ev proto.Event) bool { return ev.Type == proto.EventToolFinished && ev.Tool == "write_file" }, kill)
		}},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			gate := &gateFn{}
			model, err := scripted.Start(durableScript(gate.call))
			require.NoError(t, err)
			defer model.Close()
			workspace := t.TempDir()
			c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
				"HERALD_WORKSPACE": workspace, "HERALD_DATA_DIR": t.TempDir()})
			c.serve("gateway", "toolrunner", "memory", "compressor")
			first := c.serve("loop")
			task := NewTask("durable task")
			killed := make(chan struct{})
			var once sync.Once
			p.arm(t, c, task.SessionID, gate, func() { once.Do(func() { first.kill9(); close(killed) }) })
			submit(t, c, task)
			select {
			case <-killed:
			case <-time.After(60 * time.Second):
				t.Fatal("the kill point was never reached")
			}
			c.serve("loop") // a fresh loop process picks the session up
			res := waitResult(t, c, task, 90*time.Second)
			checkUndisturbedOutcome(t, c, workspace, task, res)
			require.Zero(t, dlqCount(t, c.JS, bus.StreamLLMResponses)+dlqCount(t, c.JS, bus.StreamToolResults), "nothing dead-lettered")
		})
	}
}

type gateFn struct {
	mu sync.Mutex
	f  func(int)
}

func (g *gateFn) set(f func(int)) { g.mu.Lock(); g.f = f; g.mu.Unlock() }
func (g *gateFn) call(i int) {
	g.mu.Lock()
	f := g.f
	g.mu.Unlock()
	if f != nil {
		f(i)
	}
}

func TestTwoLoopProcessesNeverBothAdvanceOneSession(t *testing.T) {
	model, err := scripted.Start(durableScript(nil))
	require.NoError(t, err)
	defer model.Close()
	root := t.TempDir()
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"HERALD_WORKSPACE": root, "HERALD_DATA_DIR": t.TempDir()})
	c.serve("gateway", "toolrunner", "memory", "compressor")
	c.serve("loop")
	c.serve("loop")
	var tasks []proto.Task
	for i := 0; i < 8; i++ {
		task := NewTask("durable task")
		task.Workspace = fmt.Sprintf("w%d", i)
		tasks = append(tasks, task)
		submit(t, c, task)
	}
	for _, task := range tasks {
		res := waitResult(t, c, task, 120*time.Second)
		checkUndisturbedOutcome(t, c, filepath.Join(root, task.Workspace), task, res)
	}
}
