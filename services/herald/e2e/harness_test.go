package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/loop"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Shared across the test binary: the herald binary and a ClickHouse server.
var (
	heraldBin string
	chBase    string
)

func TestMain(m *testing.M) {
	if os.Getenv(mcpHelperEnv) != "" {
		runMCPServer() // the test binary re-executed as a stdio MCP server
		return
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "herald-e2e-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	heraldBin = os.Getenv("HERALD_BIN")
	if heraldBin == "" {
		heraldBin = filepath.Join(dir, "herald")
		out, err := exec.Command("go", "build", "-o", heraldBin, "github.com/heraldrun/herald/services/herald").CombinedOutput()
		if err != nil {
			panic("building herald: " + err.Error() + "\n" + string(out))
		}
	}
	chBase = os.Getenv(accounting.TestDSNEnv)
	if chBase == "" {
		local, err := accounting.StartLocalClickHouse(context.Background(), filepath.Join(dir, "ch"), heraldtestNop())
		if err != nil {
			panic("ClickHouse for tests: " + err.Error() + " (install clickhouse-server or set " + accounting.TestDSNEnv + ")")
		}
		defer local.Stop()
		chBase = local.DSN()
	}
	return m.Run()
}

// freshClickHouse returns a DSN naming a new database for one test.
func freshClickHouse(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, drop, err := accounting.FreshDatabase(ctx, chBase)
	require.NoError(t, err)
	t.Cleanup(drop)
	return dsn
}

// H is a whole Herald in the test process.
type H struct {
	t         testing.TB
	App       *app.App
	Model     *scripted.Server
	NC        *nats.Conn
	JS        jetstream.JetStream
	Config    config.Config
	Workspace string

	mu     sync.Mutex
	events map[string][]proto.Event
	// eventLog is the subscription that fills events.
	eventLog *nats.Subscription
}

// Option adjusts the configuration of a harness.
type Option func(*config.Config, *app.Options)

// WithClickHouse makes accounting sink into a fresh ClickHouse database.
func WithClickHouse(t testing.TB) Option {
	dsn := freshClickHouse(t)
	return func(c *config.Config, _ *app.Options) { c.ClickHouseDSN = dsn }
}

// WithConfig adjusts the configuration.
func WithConfig(f func(*config.Config)) Option {
	return func(c *config.Config, _ *app.Options) { f(c) }
}

// WithConcurrency sets how many calls each service works on at once.
func WithConcurrency(n int) Option {
	return func(_ *config.Config, o *app.Options) { o.Concurrency = n }
}

// WithToolConcurrency is WithConcurrency, named for tests about tool runs.
func WithToolConcurrency(n int) Option { return WithConcurrency(n) }

// Start runs every service in-process against a scripted model.
func Start(t testing.TB, script scripted.Script, opts ...Option) *H {
	t.Helper()
	model, err := scripted.Start(script)
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Workspace = filepath.Join(dir, "workspace")
	cfg.Primary = config.Provider{Provider: "openai", Model: "test-model", BaseURL: model.URL}
	cfg.Retry = config.Retry{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
		RateBaseDelay: time.Millisecond, RateMaxDelay: 5 * time.Millisecond, CallTimeout: 30 * time.Second}
	cfg.Approvals.Timeout = 2 * time.Second
	cfg.Pricing = map[string]config.Price{"test-model": {Input: 1, Output: 2, CacheRead: 0.5}}
	ao := app.Options{StoreDir: filepath.Join(dir, "nats"), Log: heraldtest.Logger(t), Instance: "test"}
	for _, o := range opts {
		o(&cfg, &ao)
	}
	ao.Config = cfg
	require.NoError(t, os.MkdirAll(cfg.Workspace, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.Start(ctx, ao)
	require.NoError(t, err)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		a.Shutdown(sctx)
	})
	h := &H{t: t, App: a, Model: model, NC: a.NC, Config: cfg, Workspace: cfg.Workspace, events: map[string][]proto.Event{}}
	h.JS, err = jetstream.New(a.NC)
	require.NoError(t, err)
	sub, err := a.NC.Subscribe("herald.session.*.events", func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			h.mu.Lock()
			h.events[ev.SessionID] = append(h.events[ev.SessionID], ev)
			h.mu.Unlock()
		}
	})
	require.NoError(t, err)
	h.eventLog = sub
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return h
}

// StopEventLog stops collecting every session's events (Events): the cost
// benchmarks measure Herald, not a harness decoding all it publishes.
func (h *H) StopEventLog() {
	h.t.Helper()
	require.NoError(h.t, h.eventLog.Unsubscribe())
}

// NewTask returns a task with fresh ids.
func NewTask(prompt string) proto.Task {
	return proto.Task{Prompt: prompt, SessionID: "s-" + uuid.NewString()[:13], TaskID: "t-" + uuid.NewString()}
}

// Submit publishes a task.
func (h *H) Submit(task proto.Task) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(h.t, bus.PublishJSON(ctx, h.JS, bus.TasksSubject, "", task))
}

// Run submits task and waits for its result.
func (h *H) Run(task proto.Task) proto.Result {
	h.t.Helper()
	h.Submit(task)
	return h.WaitResult(task, 60*time.Second)
}

// WaitResult waits for the durable result of task.
func (h *H) WaitResult(task proto.Task, timeout time.Duration) proto.Result {
	h.t.Helper()
	var res proto.Result
	require.Eventually(h.t, func() bool {
		var ok bool
		res, ok = h.Result(task)
		return ok
	}, timeout, 20*time.Millisecond, "no result for task %s of session %s", task.TaskID, task.SessionID)
	return res
}

// Result returns the task's result if it has one.
func (h *H) Result(task proto.Task) (proto.Result, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	raw, err := bus.LastOnSubject(ctx, h.JS, bus.StreamSessions, bus.SessionResult(task.SessionID))
	if err != nil {
		return proto.Result{}, false
	}
	var res proto.Result
	if json.Unmarshal(raw.Data, &res) != nil || res.TaskID != task.TaskID {
		return proto.Result{}, false
	}
	return res, true
}

// Transcript returns a session's persisted messages, once its turn is
// committed.
func (h *H) Transcript(sid string) []*heraldpb.ChatMessage {
	h.t.Helper()
	entries := committedTranscript(h.t, h.JS, sid)
	out := make([]*heraldpb.ChatMessage, len(entries))
	for i, e := range entries {
		out[i] = e.Message
	}
	return out
}

// Events returns the events seen so far for a session.
func (h *H) Events(sid string) []proto.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]proto.Event(nil), h.events[sid]...)
}

// EventsOfType filters Events by type.
func (h *H) EventsOfType(sid, typ string) []proto.Event {
	var out []proto.Event
	for _, ev := range h.Events(sid) {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// RequestsOf returns the model requests of one conversation (by its first user message).
func (h *H) RequestsOf(prompt string) []*scripted.Request {
	var out []*scripted.Request
	for _, r := range h.Model.Requests() {
		if r.FirstUser() == prompt {
			out = append(out, r)
		}
	}
	return out
}

// committedTranscript returns a session's transcript once its turn is
// committed. A turn's result is stored with the final transition's entries,
// just before that transition's state is committed, so a reader that has
// seen the result may still find the state before it for a moment.
func committedTranscript(t testing.TB, js jetstream.JetStream, sid string) []*heraldpb.TranscriptEntry {
	t.Helper()
	var entries []*heraldpb.TranscriptEntry
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, got, err := loop.SessionTranscript(ctx, js, sid)
		if err != nil || st.Status != "idle" || st.Pending != nil {
			return false
		}
		entries = got
		return true
	}, 20*time.Second, 20*time.Millisecond, "session %s: its turn is committed", sid)
	return entries
}
