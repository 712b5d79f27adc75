package deploytest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..", "..")

func deployPath(parts ...string) string {
	return filepath.Join(append([]string{repoRoot, "deploy"}, parts...)...)
}

// natsConf is the server configuration under test.
var natsConf = deployPath("nats", "herald.conf")

// serviceUsers are the users the config gives each service; client and
// admin are the two users that are not services.
var serviceUsers = []string{"loop", "gateway", "toolrunner", "compressor", "memory", "accounting"}

// tenantUsers are the example users of tenants acme and globex.
var tenantUsers = []string{"tenant_acme", "tenant_globex"}

// usersBut is every user but the services named: clients, plugins, the
// api, tenants and the other services.
func usersBut(services ...string) []string {
	users := append([]string{"client", "plugins", "api"}, tenantUsers...)
	for _, u := range serviceUsers {
		if !slices.Contains(services, u) {
			users = append(users, u)
		}
	}
	return users
}

// passwordEnv names the environment variable holding user's password.
func passwordEnv(user string) string { return strings.ToUpper(user) + "_PASSWORD" }

// password is the test password of user (set in the environment for the server).
func password(user string) string { return "test-" + user + "-pw" }

// secured is a NATS server running deploy/nats/herald.conf.
type secured struct {
	srv *embedded.Server
	log *heraldtest.SyncBuffer
	// addr is host:port of the client listener.
	addr string
}

// startSecured starts an embedded server with the deployment's config, the
// passwords coming from the environment as they do in compose and k8s.
func startSecured(t *testing.T) *secured {
	t.Helper()
	for _, u := range append(append([]string{"admin", "client", "sys", "plugins", "api"}, serviceUsers...), tenantUsers...) {
		t.Setenv(passwordEnv(u), password(u))
	}
	log := &heraldtest.SyncBuffer{}
	srv, err := embedded.Start(embedded.Options{ConfigFile: natsConf, StoreDir: t.TempDir(), Listen: "127.0.0.1:0",
		Log: zerolog.New(log).Level(zerolog.WarnLevel)})
	require.NoError(t, err, log.String())
	t.Cleanup(srv.Shutdown)
	u, err := url.Parse(srv.ClientURL())
	require.NoError(t, err)
	return &secured{srv: srv, log: log, addr: u.Host}
}

// url is the client URL carrying user's credentials, as HERALD_NATS_URL would.
func (s *secured) url(user string) string {
	return fmt.Sprintf("nats://%s:%s@%s", user, password(user), s.addr)
}

// violations are the permission violations the server logged.
func (s *secured) violations() []string {
	var out []string
	for _, line := range strings.Split(s.log.String(), "\n") {
		if strings.Contains(line, "Violation") {
			out = append(out, line)
		}
	}
	return out
}

// conn is a client connection that records the server's asynchronous errors.
type conn struct {
	t    *testing.T
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []error
}

func (s *secured) connect(t *testing.T, user string) *conn {
	t.Helper()
	c := &conn{t: t}
	nc, err := nats.Connect(s.url(user), nats.Name("deploytest-"+user), nats.CustomInboxPrefix("_INBOX_"+user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return c
}

// requireDenied waits for the server to report a permission violation on
// subject ("publish" or "subscription" names the direction).
func (c *conn) requireDenied(direction, subject string) {
	c.t.Helper()
	want := fmt.Sprintf("%s to %q", direction, subject)
	require.Eventually(c.t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, err := range c.errs {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "no permission violation for %s; errors: %v", want, c.errors())
}

func (c *conn) errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// declared connects as admin and declares every stream, bucket and object
// store, as `herald declare` does.
func (s *secured) declared(t *testing.T) *conn {
	t.Helper()
	admin := s.connect(t, "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := bus.Declare(ctx, admin.js, 1)
	require.NoError(t, err)
	return admin
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func TestEveryUserNeedsItsPassword(t *testing.T) {
	s := startSecured(t)
	for _, u := range append([]string{"admin", "client", "plugins"}, serviceUsers...) {
		nc, err := nats.Connect(s.url(u))
		require.NoError(t, err, "user %s connects with its password", u)
		nc.Close()
		_, err = nats.Connect(fmt.Sprintf("nats://%s:wrong@%s", u, s.addr))
		require.ErrorIs(t, err, nats.ErrAuthorization, "user %s is refused with a wrong password", u)
	}
	_, err := nats.Connect("nats://" + s.addr)
	require.ErrorIs(t, err, nats.ErrAuthorization, "nobody connects without credentials")
}

func TestAdminDeclaresTheStreamsAndBuckets(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, cfg := range bus.Streams(1) {
		_, err := admin.js.Stream(ctx, cfg.Name)
		require.NoError(t, err, "stream %s exists", cfg.Name)
	}
	for _, cfg := range bus.Buckets(1) {
		_, err := admin.js.KeyValue(ctx, cfg.Bucket)
		require.NoError(t, err, "bucket %s exists", cfg.Bucket)
	}
}

// TestToolRunnerCannotPublishUsageNorReadSessions is the check: a
// tool runner's credentials (a tool could leak them) cannot forge usage,
// start model calls or tasks, nor read a session's state or transcript.
func TestToolRunnerCannotPublishUsageNorReadSessions(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A session with state and a transcript entry, as the loop leaves them.
	sessions, err := admin.js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	_, err = sessions.Put(ctx, "s1", []byte(`{"session_id":"s1","secret":"state"}`))
	require.NoError(t, err)
	require.NoError(t, bus.Publish(ctx, admin.js, bus.SessionLog("s1"), "", []byte("transcript")))

	tr := s.connect(t, "toolrunner")

	// Usage: neither a stored nor a core publish gets through.
	_, err = tr.js.Publish(shortCtx(t), bus.UsageSubject("acme"), []byte("forged"))
	require.Error(t, err)
	tr.requireDenied("publish", "herald.usage.acme")
	require.NoError(t, tr.nc.Publish("herald.usage.x", []byte("forged")))
	tr.requireDenied("publish", "herald.usage.x")
	stored, err := bus.PendingWork(ctx, admin.js, bus.StreamUsage)
	require.NoError(t, err)
	require.Zero(t, stored, "no forged usage event was stored")

	// Session state: the bucket cannot be opened, read directly, watched or consumed.
	_, err = tr.js.KeyValue(shortCtx(t), bus.BucketSessions)
	require.Error(t, err)
	tr.requireDenied("publish", "$JS.API.STREAM.INFO.KV_herald_sessions")
	_, err = tr.nc.Request("$JS.API.DIRECT.GET.KV_herald_sessions.$KV.herald_sessions.s1", nil, 500*time.Millisecond)
	require.Error(t, err)
	tr.requireDenied("publish", "$JS.API.DIRECT.GET.KV_herald_sessions.$KV.herald_sessions.s1")
	_, err = tr.nc.Request("$JS.API.STREAM.MSG.GET.KV_herald_sessions", []byte(`{"last_by_subj":"$KV.herald_sessions.s1"}`), 500*time.Millisecond)
	require.Error(t, err)
	tr.requireDenied("publish", "$JS.API.STREAM.MSG.GET.KV_herald_sessions")
	_, err = tr.nc.SubscribeSync("$KV.herald_sessions.>")
	require.NoError(t, err)
	tr.requireDenied("subscription", "$KV.herald_sessions.>")
	_, err = tr.js.OrderedConsumer(shortCtx(t), "KV_herald_sessions", jetstream.OrderedConsumerConfig{})
	require.Error(t, err)

	// Transcripts: no core subscription, no stream read, no consumer.
	_, err = tr.nc.SubscribeSync("herald.internal.session.*.log")
	require.NoError(t, err)
	tr.requireDenied("subscription", "herald.internal.session.*.log")
	_, err = tr.nc.Request("$JS.API.STREAM.MSG.GET.SESSIONS", []byte(`{"last_by_subj":"herald.internal.session.s1.log"}`), 500*time.Millisecond)
	require.Error(t, err)
	tr.requireDenied("publish", "$JS.API.STREAM.MSG.GET.SESSIONS")
	_, err = tr.nc.Request("$JS.API.CONSUMER.CREATE.SESSIONS.peek.herald.internal.session.*.log", []byte(`{}`), 500*time.Millisecond)
	require.Error(t, err)
	tr.requireDenied("publish", "$JS.API.CONSUMER.CREATE.SESSIONS.peek.herald.internal.session.*.log")

	// Nor can it start work it should not: tasks, model calls, stream deletion.
	for _, subj := range []string{bus.TasksSubject, bus.LLMRequest("s1"), "$JS.API.STREAM.DELETE.SESSIONS",
		"$JS.API.STREAM.PURGE.USAGE", "$JS.API.CONSUMER.MSG.NEXT.TOOL_CALLS.memory"} {
		require.NoError(t, tr.nc.Publish(subj, []byte("{}")))
		tr.requireDenied("publish", subj)
	}

	// What admin wrote is intact and readable by those allowed.
	e, err := sessions.Get(ctx, "s1")
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), "state")
}

// TestLoopReadsAndWritesSessionState shows the loop's user can do what the
// toolrunner's cannot: open the session bucket, create and update state by
// revision, and read the transcript back.
func TestLoopReadsAndWritesSessionState(t *testing.T) {
	s := startSecured(t)
	s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	lp := s.connect(t, "loop")
	require.NoError(t, bus.Ensure(ctx, lp.js, 1), "the loop checks the streams at start-up, as app.Start does")
	kv, err := lp.js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	rev, err := kv.Create(ctx, "s2", []byte("v1"))
	require.NoError(t, err)
	_, err = kv.Update(ctx, "s2", []byte("v2"), rev)
	require.NoError(t, err)
	_, err = kv.Update(ctx, "s2", []byte("stale"), rev)
	require.ErrorIs(t, err, jetstream.ErrKeyRevisionMismatch, "compare-and-set still guards the state")
	e, err := kv.Get(ctx, "s2")
	require.NoError(t, err)
	require.Equal(t, "v2", string(e.Value()))

	require.NoError(t, bus.Publish(ctx, lp.js, bus.SessionLog("s2"), "s2:0", []byte("entry")))
	raw, err := bus.LastOnSubject(ctx, lp.js, bus.StreamSessions, bus.SessionLog("s2"))
	require.NoError(t, err)
	require.Equal(t, "entry", string(raw.Data))

	// But the loop does not account: usage is the gateway's to publish.
	require.NoError(t, lp.nc.Publish(bus.UsageSubject("acme"), []byte("x")))
	lp.requireDenied("publish", "herald.usage.acme")
	require.Eventually(t, func() bool { return len(s.violations()) > 0 }, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, strings.Join(s.violations(), "\n"), "herald.usage.acme", "the server logs the refusal")
	require.Empty(t, filterOut(s.violations(), "herald.usage.acme"), "nothing else the loop did was refused")
}

// TestGatewayReadsButCannotWriteSessionState: the gateway reads a session's
// record to drop a redelivered request the session has moved past, and can
// neither change the record nor watch the bucket.
func TestGatewayReadsButCannotWriteSessionState(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sessions, err := admin.js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	_, err = sessions.Put(ctx, "s1", []byte(`{"session_id":"s1","turn":1,"step":2}`))
	require.NoError(t, err)

	gw := s.connect(t, "gateway")
	kv, err := gw.js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	e, err := kv.Get(ctx, "s1")
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"step":2`)
	require.Empty(t, s.violations(), "reading is allowed")

	_, err = kv.Put(shortCtx(t), "s1", []byte("forged"))
	require.Error(t, err)
	gw.requireDenied("publish", "$KV.herald_sessions.s1")
	_, err = gw.nc.SubscribeSync("$KV.herald_sessions.>")
	require.NoError(t, err)
	gw.requireDenied("subscription", "$KV.herald_sessions.>")
	e, err = sessions.Get(ctx, "s1")
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"step":2`, "the record is intact")
}

// filterOut drops lines mentioning s.
func filterOut(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestEachUserIsRefusedWhatBelongsToOthers: with any one service's
// credentials, the work of the others cannot be forged or stolen.
func TestEachUserIsRefusedWhatBelongsToOthers(t *testing.T) {
	s := startSecured(t)
	refused := map[string][]string{
		// publishing usage is the gateway's alone; accounting only reads it
		"loop":       {"herald.usage.acme", "herald.toolevents.acme", "$JS.API.STREAM.PURGE.SESSIONS"},
		"accounting": {"herald.usage.acme", "herald.tasks", "$KV.herald_sessions.s1", "$JS.API.STREAM.PURGE.USAGE"},
		// the gateway answers model calls; it does not start sessions or change
		// their state (it reads it: TestGatewayReadsButCannotWriteSessionState)
		"gateway": {"herald.tasks", "$KV.herald_sessions.s1", "herald.tool.result.s1.c1", "$JS.API.STREAM.MSG.GET.KV_herald_sessions"},
		// the compressor reads its own model answers, never the loop's consumer
		"compressor": {"$JS.API.CONSUMER.MSG.NEXT.LLM_RESPONSES.loop-llm",
			"$JS.API.CONSUMER.CREATE.LLM_RESPONSES.loop-llm.herald.llm.response.compressor.s1",
			"$JS.API.CONSUMER.DELETE.LLM_RESPONSES.loop-llm", "herald.usage.acme", "herald.internal.session.s1.log"},
		// memory indexes transcripts through its consumer; it does not read results or state
		"memory": {"herald.usage.acme", "$JS.API.STREAM.MSG.GET.SESSIONS", "$KV.herald_sessions.s1", "herald.llm.request.s1"},
		// a client submits tasks; it cannot forge results, usage or model calls
		"client": {"herald.usage.acme", "herald.tool.result.s1.c1", "herald.internal.session.s1.log", "herald.session.s1.result",
			"$JS.API.STREAM.MSG.GET.SESSIONS", "$JS.API.CONSUMER.CREATE.SESSIONS.c1.herald.internal.session.s1.log",
			"herald.llm.request.s1", "herald.tool.call.default.s1", "$KV.herald_sessions.s1", "$JS.API.STREAM.DELETE.TASKS"},
	}
	for user, subjects := range refused {
		c := s.connect(t, user)
		for _, subj := range subjects {
			require.NoError(t, c.nc.Publish(subj, []byte("{}")))
			c.requireDenied("publish", subj)
		}
	}
	subscribeRefused := map[string][]string{
		"gateway":    {"herald.session.*.input", "herald.internal.session.*.log", "$KV.herald_sessions.>"},
		"compressor": {"herald.session.*.events", "herald.llm.response.>"},
		"accounting": {"herald.usage.>", "herald.session.*.events"},
		"client":     {"herald.internal.session.*.log", "herald.llm.response.>", "$KV.>", "herald.memory.snapshot"},
	}
	for user, subjects := range subscribeRefused {
		c := s.connect(t, user)
		for _, subj := range subjects {
			_, err := c.nc.SubscribeSync(subj)
			require.NoError(t, err)
			c.requireDenied("subscription", subj)
		}
	}
}

// TestOnlyAdminChangesStreams: no service user (nor the client) may create,
// update or delete a stream — a tool runner could otherwise reconfigure the
// session bucket to republish state to itself — yet each finds the admin's
// declaration in place and starts.
func TestOnlyAdminChangesStreams(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, user := range append([]string{"client"}, serviceUsers...) {
		c := s.connect(t, user)
		require.NoError(t, bus.Ensure(ctx, c.js, 1), "%s finds the streams declared", user)
		for _, subj := range []string{"$JS.API.STREAM.UPDATE.KV_herald_sessions", "$JS.API.STREAM.CREATE.HIJACK",
			"$JS.API.STREAM.UPDATE.USAGE", "$JS.API.STREAM.DELETE.TOOL_CALLS", "$JS.API.STREAM.UPDATE.OBJ_herald_claims_sessions"} {
			require.NoError(t, c.nc.Publish(subj, []byte("{}")))
			c.requireDenied("publish", subj)
		}
	}
	sessions, err := admin.js.Stream(ctx, "KV_herald_sessions")
	require.NoError(t, err)
	info, err := sessions.Info(ctx)
	require.NoError(t, err)
	require.Empty(t, info.Config.RePublish, "the session bucket republishes nowhere")
}

// TestRepliesArePrivateToTheirUser: each user's replies (API answers,
// publish acks, pulled messages) arrive under its own inbox prefix, which
// no other user may subscribe to, nor to the shared _INBOX.>.
func TestRepliesArePrivateToTheirUser(t *testing.T) {
	s := startSecured(t)
	for _, user := range append([]string{"client"}, serviceUsers...) {
		c := s.connect(t, user)
		other := "loop"
		if user == "loop" {
			other = "gateway"
		}
		for _, subj := range []string{"_INBOX.>", "_INBOX_" + other + ".>", ">"} {
			_, err := c.nc.SubscribeSync(subj)
			require.NoError(t, err)
			c.requireDenied("subscription", subj)
		}
		_, err := c.nc.SubscribeSync("_INBOX_" + user + ".mine")
		require.NoError(t, err)
		require.NoError(t, c.nc.Flush())
	}
	require.NotContains(t, strings.Join(s.violations(), "\n"), ".mine", "a user may subscribe to its own replies")
}
