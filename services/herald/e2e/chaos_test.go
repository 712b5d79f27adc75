package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

// chaosScript: write a file, run a non-idempotent command, read the file,
// answer — with model latency so kills land mid-call. Every call the model
// serves is noted in served (when not nil).
func chaosScript(served *servedCalls) scripted.Script {
	replies := []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "write_file", Args: `{"path":"notes.txt","content":"chaos"}`}}, Delay: 50 * time.Millisecond},
		{ToolCalls: []scripted.Call{{Name: "terminal", Args: `{"command":"echo effect >> effects.log; sleep 0.2"}`}}, Delay: 50 * time.Millisecond},
		{ToolCalls: []scripted.Call{{Name: "read_file", Args: `{"path":"notes.txt"}`}}, Delay: 50 * time.Millisecond},
		{Content: "survived: the notes say chaos", Delay: 50 * time.Millisecond},
	}
	return func(r *scripted.Request) scripted.Reply {
		served.note(r)
		return replies[min(r.AssistantCount(), len(replies)-1)]
	}
}

// chaosModelCalls is how many model calls an undisturbed chaos session makes.
const chaosModelCalls = 4

var chaosRoles = []string{"system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"}

// serviceSet keeps one process per service and replaces killed ones.
type serviceSet struct {
	c     *cluster
	mu    sync.Mutex
	procs map[string]*proc
	kills atomic.Int64
}

func (s *serviceSet) start(name string) {
	p := s.c.serve(name)
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
}

// killOne kill -9s a random service and starts a replacement.
func (s *serviceSet) killOne(rng *rand.Rand) string {
	s.mu.Lock()
	names := make([]string, 0, len(s.procs))
	for n := range s.procs {
		names = append(names, n)
	}
	name := names[rng.IntN(len(names))]
	p := s.procs[name]
	s.mu.Unlock()
	p.kill9()
	s.kills.Add(1)
	s.start(name)
	return name
}

func chaosSessions() int {
	if n, err := strconv.Atoi(os.Getenv("HERALD_CHAOS_SESSIONS")); err == nil && n > 0 {
		return n
	}
	return 24 // the short version that runs in CI; `make chaos` runs 200
}

// TestChaosKillsLoseNothing kills a random service at a random moment, again
// and again, while sessions with tool calls run: every session must end with
// the answer of an undisturbed run, no tool effect may happen twice, and no
// usage event may be lost or counted twice in ClickHouse.
func TestChaosKillsLoseNothing(t *testing.T) {
	sessions := chaosSessions()
	served := &servedCalls{at: map[modelCall][]time.Time{}}
	model, err := scripted.Start(chaosScript(served))
	require.NoError(t, err)
	defer model.Close()
	root := t.TempDir()
	dsn := freshClickHouse(t)
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini",
		"HERALD_WORKSPACE": root, "HERALD_DATA_DIR": t.TempDir(), "HERALD_CLICKHOUSE_DSN": dsn})
	set := &serviceSet{c: c, procs: map[string]*proc{}}
	for _, n := range []string{"accounting", "memory", "toolrunner", "compressor", "gateway", "loop"} {
		set.start(n)
	}

	tasks := make([]proto.Task, sessions)
	for i := range tasks {
		tasks[i] = NewTask(chaosPrompt(i))
		tasks[i].Workspace = tasks[i].SessionID
		submit(t, c, tasks[i])
	}
	done := make(chan struct{})
	killed := map[string]int{}
	var killMu sync.Mutex
	go func() {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(150+rng.IntN(600)) * time.Millisecond):
			}
			name := set.killOne(rng)
			killMu.Lock()
			killed[name]++
			killMu.Unlock()
		}
	}()
	results := make([]proto.Result, len(tasks))
	for i, task := range tasks {
		results[i] = waitResult(t, c, task, 5*time.Minute)
	}
	close(done)

	unknown := 0
	for i, task := range tasks {
		res := results[i]
		require.Equal(t, proto.ExitTextResponse, res.ExitReason, "session %s: %s", task.SessionID, res.Error)
		require.Equal(t, "survived: the notes say chaos", res.FinalResponse)
		entries := committedTranscript(t, c.JS, task.SessionID)
		var roles []string
		outcomeUnknown := false
		for _, e := range entries {
			roles = append(roles, e.Message.Role)
			outcomeUnknown = outcomeUnknown || (e.Message.Role == "tool" && strings.Contains(strings.ToLower(e.Message.Content), "outcome unknown"))
		}
		require.Equal(t, chaosRoles, roles, "session %s: no message lost or duplicated", task.SessionID)
		effects, _ := os.ReadFile(filepath.Join(root, task.Workspace, "effects.log"))
		n := strings.Count(string(effects), "effect")
		require.LessOrEqual(t, n, 1, "session %s: the command ran twice", task.SessionID)
		if n == 0 || outcomeUnknown {
			unknown++
			require.True(t, outcomeUnknown, "session %s: the command never ran, and the model was not told its outcome is unknown", task.SessionID)
		}
	}
	dup, lost := checkUsage(t, c, dsn)
	surplus := served.surplus(t, c, tasks)
	t.Logf("chaos: sessions=%d kills=%d (%v) duplicates=%d lost=%d outcome_unknown=%d", sessions, set.kills.Load(), killed, dup, lost, unknown)
	t.Logf("chaos: model calls served=%d needed=%d stale_resends=%d inflight_resends=%d", surplus.served, surplus.needed, surplus.stale, surplus.inFlight)
	require.Zero(t, dup, "usage events counted twice")
	require.Zero(t, lost, "usage events lost")
	require.Zero(t, surplus.stale, "model calls sent again after their answer was stored (the session had moved on): paid twice")
	require.Equal(t, len(tasks)*chaosModelCalls, surplus.needed, "each session needed one call per step")
	require.Positive(t, set.kills.Load())
}

// checkUsage waits for the sink to drain the usage stream, then compares
// ClickHouse with every model response stored on the bus: each attempt of
// each response must have exactly one row.
func checkUsage(t *testing.T, c *cluster, dsn string) (duplicates, lost int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		n, err := bus.PendingWork(ctx, c.JS, bus.StreamUsage)
		return err == nil && n == 0
	}, 2*time.Minute, 200*time.Millisecond, "the usage stream never drained into ClickHouse")

	opts, err := clickhouse.ParseDSN(dsn)
	require.NoError(t, err)
	conn, err := clickhouse.Open(opts)
	require.NoError(t, err)
	defer conn.Close()
	rows, err := conn.Query(ctx, "SELECT event_id, count() FROM usage_events GROUP BY event_id")
	require.NoError(t, err)
	stored := map[string]uint64{}
	for rows.Next() {
		var id string
		var n uint64
		require.NoError(t, rows.Scan(&id, &n))
		stored[id] = n
		if n > 1 {
			duplicates++
		}
	}
	require.NoError(t, rows.Err())

	cons, err := c.JS.OrderedConsumer(ctx, bus.StreamLLMResponses, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	s, err := c.JS.Stream(ctx, bus.StreamLLMResponses)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	for i := uint64(0); i < info.State.Msgs; i++ {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		resp := &heraldpb.LLMResponse{}
		require.NoError(t, gproto.Unmarshal(m.Data(), resp))
		for a := 1; a <= int(resp.Attempts); a++ {
			if !hasAttempt(stored, resp.RequestId, a) {
				lost++
				t.Logf("no usage row for attempt %d of %s", a, resp.RequestId)
			}
		}
	}
	return duplicates, lost
}

// hasAttempt finds the row of one attempt: <request>:<attempt>, or
// <request>:d<delivery>:<attempt> for attempts made after a redelivery.
func hasAttempt(stored map[string]uint64, requestID string, attempt int) bool {
	if stored[fmt.Sprintf("%s:%d", requestID, attempt)] > 0 {
		return true
	}
	suffix := fmt.Sprintf(":%d", attempt)
	for id := range stored {
		if strings.HasPrefix(id, requestID+":d") && strings.HasSuffix(id, suffix) {
			return true
		}
	}
	return false
}

// restartResumeBound is how soon after a NATS restart every session must have
// finished. They take about 4 s (a reconnect plus the rest of the script);
// a tool call the server handed out as it went down, which never reached the
// runner, comes back after the tool runner's 10 s AckWait.
const restartResumeBound = 20 * time.Second

// TestNATSRestartMidRun restarts the NATS server (file store) while
// sessions run: services reconnect and every session finishes once, within
// seconds of the restart.
func TestNATSRestartMidRun(t *testing.T) {
	model, err := scripted.Start(chaosScript(nil))
	require.NoError(t, err)
	defer model.Close()
	root := t.TempDir()
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"HERALD_WORKSPACE": root, "HERALD_DATA_DIR": t.TempDir()})
	c.serve("memory", "toolrunner", "compressor", "gateway", "loop")
	tasks := make([]proto.Task, 12)
	for i := range tasks {
		tasks[i] = NewTask("chaos task")
		tasks[i].Workspace = tasks[i].SessionID
		submit(t, c, tasks[i])
	}
	// Restart once the first session is under way.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(root, tasks[0].Workspace, "notes.txt"))
		return err == nil
	}, time.Minute, 10*time.Millisecond)
	restarted := time.Now()
	c.restartServer()
	var slowest time.Duration
	for _, task := range tasks {
		res := waitResult(t, c, task, 3*time.Minute)
		require.Equal(t, proto.ExitTextResponse, res.ExitReason, "session %s: %s", task.SessionID, res.Error)
		require.Equal(t, "survived: the notes say chaos", res.FinalResponse)
		effects, _ := os.ReadFile(filepath.Join(root, task.Workspace, "effects.log"))
		require.LessOrEqual(t, strings.Count(string(effects), "effect"), 1, "session %s: the command ran twice", task.SessionID)
		took := resultStored(t, c, task).Sub(restarted)
		require.Less(t, took, restartResumeBound, "session %s finished %s after the restart", task.SessionID, took)
		slowest = max(slowest, took)
	}
	t.Logf("restart: sessions=%d all finished after a NATS restart, the last %s after it", len(tasks), slowest.Round(10*time.Millisecond))
}

// resultStored is when the server stored the session's result.
func resultStored(t *testing.T, c *cluster, task proto.Task) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := bus.LastOnSubject(ctx, c.JS, bus.StreamSessions, bus.SessionResult(task.SessionID))
	require.NoError(t, err)
	return raw.Time
}
