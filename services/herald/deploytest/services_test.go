package deploytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/loop"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

const (
	taskPrompt = "read my notes and remember what I like"
	summary    = "## Goal\nKeep going.\n## Constraints\nNone.\n## Completed actions\nRead files.\n" +
		"## Current state\nHalf done.\n## Open questions\nNone.\n## Relevant files\nnotes.txt\n## Remaining work\nFinish."
)

// model answers the task with a file read, a question to the user, a
// memory write and a text; any
// other conversation (the compressor's summary call) gets a summary.
func model(r *scripted.Request) scripted.Reply {
	if r.FirstUser() != taskPrompt {
		return scripted.Text(summary)
	}
	switch r.AssistantCount() {
	case 0:
		return scripted.Tool("read_file", `{"path":"notes.txt"}`)
	case 1:
		return scripted.Tool("clarify", `{"question":"Which tea?","choices":["green","black"]}`)
	case 2:
		return scripted.Tool("memory", `{"action":"add","target":"user","content":"likes green tea"}`)
	}
	return scripted.Text("You like green tea.")
}

// TestEveryServiceRunsUnderItsOwnUser is the strongest proof of the config:
// each service runs as its own process composition (app.Start, as `herald
// serve <svc>` does) connected with its own user, a client user submits a
// task that reads a file and writes memory, the compressor answers a
// request through the gateway, accounting stores the usage in ClickHouse —
// and the server refused nothing any of them did.
func TestEveryServiceRunsUnderItsOwnUser(t *testing.T) {
	s := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dsn, stopCH, err := accounting.EnsureTestClickHouse(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(stopCH)
	admin := s.declared(t) // set-up: the admin declares streams first
	cfg := stackConfig(t, dsn)
	for _, name := range service.Names {
		startService(t, s, cfg, name)
	}

	// A plugin hears every hook and answers the requests.
	hooksHeard := hookPlugin(t, s)

	// A client submits the task and follows its events and result.
	task := proto.Task{Prompt: taskPrompt, SessionID: "s-deploy", TaskID: "t-deploy"}
	res, events := runTask(t, s, task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "You like green tea.", res.FinalResponse)
	require.NotZero(t, events, "the client received the session's events")

	// The tools really ran under their users: the file was read, memory written.
	tools := transcriptTools(t, s, task.SessionID)
	require.Len(t, tools, 3)
	require.Contains(t, tools[0], "green tea every day")
	require.Contains(t, tools[1], "the user answered: green", "the client's answer reached the tool runner")
	require.Contains(t, tools[2], `"success":true`)

	// The compressor, asked as the loop would ask it, summarises through the gateway.
	history := []*heraldpb.ChatMessage{{Role: "system", Content: "You are Herald."}, {Role: "user", Content: "Keep going."}}
	for range 30 {
		history = append(history, &heraldpb.ChatMessage{Role: "assistant", Content: strings.Repeat("work ", 600)},
			&heraldpb.ChatMessage{Role: "user", Content: "continue"})
	}
	lp := s.connect(t, "loop")
	creq := &heraldpb.CompressRequest{RequestId: "s-compress:1:compress", SessionId: "s-compress", Tenant: "default",
		Model: "test-model", Messages: history, ContextWindow: 60_000, Reason: "overflow"}
	require.NoError(t, bus.PublishProto(ctx, lp.js, bus.CompressRequest("s-compress"), creq.RequestId, creq))
	var cres heraldpb.CompressResult
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		raw, err := bus.LastOnSubject(rctx, admin.js, bus.StreamCompressResults, bus.CompressResult("s-compress"))
		return err == nil && gproto.Unmarshal(raw.Data, &cres) == nil
	}, 30*time.Second, 20*time.Millisecond, "no compression result; server refused: %v", s.violations())
	require.Less(t, cres.GetTokensAfter(), cres.GetTokensBefore())
	require.Contains(t, joinContents(cres.GetMessages()), "Half done.", "the model's summary came back through the gateway")

	// Accounting stored the session's cost in ClickHouse.
	require.Eventually(t, func() bool {
		rep, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{Session: task.SessionID})
		return err == nil && rep.Total.Calls >= 3
	}, 30*time.Second, 50*time.Millisecond, "no usage in ClickHouse; server refused: %v", s.violations())

	// Work queues drained: every consumer acked under its own user; and each
	// holds the anchor its workers publish under their own users.
	for _, name := range bus.AnchoredStreams {
		require.Eventually(t, func() bool {
			n, err := bus.PendingWork(ctx, admin.js, name)
			return err == nil && n == 0
		}, 20*time.Second, 20*time.Millisecond, "work queue %s not drained", name)
		st, err := admin.js.Stream(ctx, name)
		require.NoError(t, err)
		_, err = st.GetLastMsgForSubject(ctx, bus.AnchorSubject(name))
		require.NoError(t, err, "no anchor in %s; server refused: %v", name, s.violations())
	}
	// An interrupt from the client reaches the loop's control consumer (and
	// the gateway's subscription) and is acknowledged under the loop's user.
	client := s.connect(t, "client")
	require.NoError(t, bus.PublishJSON(ctx, client.js, bus.SessionInterrupt(task.SessionID), "", proto.Interrupt{Reason: "test"}))
	require.Eventually(t, func() bool {
		cons, err := admin.js.Consumer(ctx, bus.StreamControl, "loop-control")
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.Delivered.Consumer >= 1 && info.NumAckPending == 0
	}, 20*time.Second, 20*time.Millisecond, "the interrupt was not handled; server refused: %v", s.violations())

	for _, subj := range []string{bus.HookOnSessionStart(), bus.HookPreLLMCall(), bus.HookPreAPIRequest(), bus.HookPostAPIRequest(), bus.HookPreToolCall()} {
		require.Eventually(t, func() bool { return hooksHeard.has(subj) }, 5*time.Second, 10*time.Millisecond, "the plugin never heard %s", subj)
	}
	require.True(t, hooksHeard.answered.Load() >= 4, "the services got the plugin's answers to pre_llm_call and pre_tool_call")

	requireNoDeadLetters(t, admin.js)
	require.Empty(t, s.violations(), "no service needed a subject the config does not grant it")
}

// stackConfig is the configuration every in-process service gets: the
// scripted model, a workspace holding notes.txt, ClickHouse at dsn.
func stackConfig(t *testing.T, dsn string) config.Config {
	t.Helper()
	srv, err := scripted.Start(model)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Workspace = filepath.Join(dir, "workspace")
	cfg.ClickHouseDSN = dsn
	cfg.NATSDeclare = "check" // as deployed: the admin declares, services only check
	cfg.Primary = config.Provider{Provider: "openai", Model: "test-model", BaseURL: srv.URL}
	cfg.Pricing = map[string]config.Price{"test-model": {Input: 1, Output: 2}}
	cfg.Retry = config.Retry{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
		RateBaseDelay: time.Millisecond, RateMaxDelay: 5 * time.Millisecond, CallTimeout: 30 * time.Second}
	require.NoError(t, os.MkdirAll(cfg.Workspace, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Workspace, "notes.txt"), []byte("I drink green tea every day.\n"), 0o644))
	return cfg
}

// startService composes one service the way `herald serve <name>` does,
// connected to the secured server as the service's own user.
func startService(t *testing.T, s *secured, cfg config.Config, name string) {
	t.Helper()
	cfg.NATSURL = s.url(name)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a, err := app.Start(ctx, app.Options{Config: cfg, Services: []string{name}, Instance: name,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), ConnectTimeout: 5 * time.Second})
	require.NoError(t, err, "service %s starts under user %s; server refused: %v", name, name, s.violations())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
}

// runTask submits task as the client user, answers its clarify questions
// "green" as a person at a terminal would, and waits for its result; it
// returns the result and how many of the session's events the client saw.
func runTask(t *testing.T, s *secured, task proto.Task) (proto.Result, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	client := s.connect(t, "client")
	var seen atomic.Int32
	sub, err := client.nc.Subscribe(bus.SessionEvents(task.SessionID), func(m *nats.Msg) {
		seen.Add(1)
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == proto.EventClarify {
			in := proto.Input{RequestID: ev.RequestID, CallID: ev.CallID, Answer: "green"}
			_ = bus.PublishJSON(ctx, client.js, bus.SessionInput(task.SessionID), "", in)
		}
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, bus.PublishJSON(ctx, client.js, bus.TasksSubject, "task:"+task.TaskID, task))
	var res proto.Result
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		raw, err := bus.LastBySubscription(rctx, client.js, bus.StreamSessions, bus.SessionResult(task.SessionID))
		return err == nil && json.Unmarshal(raw.Data, &res) == nil
	}, 30*time.Second, 20*time.Millisecond, "no result; server refused: %v", s.violations())
	return res, int(seen.Load())
}

// transcriptTools returns the tool messages of a session, read as admin.
func transcriptTools(t *testing.T, s *secured, sid string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, entries, err := loop.SessionTranscript(ctx, s.connect(t, "admin").js, sid)
	require.NoError(t, err)
	var tools []string
	for _, e := range entries {
		if e.GetMessage().GetRole() == "tool" {
			tools = append(tools, e.GetMessage().GetContent())
		}
	}
	return tools
}

func joinContents(msgs []*heraldpb.ChatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.GetContent())
		b.WriteByte('\n')
	}
	return b.String()
}

func requireNoDeadLetters(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, bus.StreamDLQ)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing was dead-lettered")
}

// The client user reads session state, as herald chat's /cost, /resume and
// /sessions and run -c do against a cluster, and still cannot write it.
func TestClientReadsButCannotWriteSessionState(t *testing.T) {
	s := startSecured(t)
	s.declared(t)
	cfg := stackConfig(t, "")
	for _, name := range service.Names {
		if name != "accounting" {
			startService(t, s, cfg, name)
		}
	}
	task := proto.Task{Prompt: "hello", SessionID: "s-client-reads", TaskID: "t-client-reads"}
	res, _ := runTask(t, s, task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := s.connect(t, "client")
	st, err := loop.LoadSession(ctx, client.js, task.SessionID)
	require.NoError(t, err, "server refused: %v", s.violations())
	require.Equal(t, 1, st.Turn)
	all, err := loop.ListSessions(ctx, client.js)
	require.NoError(t, err, "server refused: %v", s.violations())
	require.Len(t, all, 1)
	require.Empty(t, s.violations(), "reading needed nothing the client is not granted")

	kv, err := client.js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	_, err = kv.Put(ctx, task.SessionID, []byte(`{}`))
	require.Error(t, err, "the client cannot change a session's state")
}
