package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

const (
	acmePrompt   = "acme: remember where we deploy"
	globexPrompt = "globex: what do you know about zanzibar"
	acmeSecret   = "acme deploys on zanzibar-7"
)

// tenantModel writes acme's secret to memory in acme's session and, in
// globex's, reads memory and searches past sessions for it.
func tenantModel(r *scripted.Request) scripted.Reply {
	n := r.AssistantCount()
	switch {
	case r.FirstUser() == acmePrompt && n == 0:
		return scripted.Tool("memory", `{"action":"add","target":"memory","content":"`+acmeSecret+`"}`)
	case r.FirstUser() == globexPrompt && n == 0:
		return scripted.Tool("memory", `{"action":"read","target":"memory"}`)
	case r.FirstUser() == globexPrompt && n == 1:
		return scripted.Tool("session_search", `{"query":"zanzibar"}`)
	}
	return scripted.Text("done")
}

// tenantResult waits for a session's result the way a tenant's front end
// reads it: an ordered consumer on SESSIONS filtered to the tenant's copy.
func tenantResult(t *testing.T, s *secured, c *conn, tenant, sid string) proto.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cons, err := c.js.OrderedConsumer(ctx, bus.StreamSessions, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.TenantSessionResult(tenant, sid)}})
	require.NoError(t, err, "server refused: %v", s.violations())
	msg, err := cons.Next(jetstream.FetchMaxWait(40 * time.Second))
	require.NoError(t, err, "no result for %s; server refused: %v", sid, s.violations())
	var res proto.Result
	require.NoError(t, json.Unmarshal(msg.Data(), &res))
	return res
}

func TestTenantsAreConfinedToTheirOwnSessions(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	cfg := stackConfig(t, "")
	srv, err := scripted.Start(tenantModel)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	cfg.Primary.BaseURL = srv.URL
	for _, name := range service.Names {
		if name != "accounting" {
			startService(t, s, cfg, name)
		}
	}
	acme, globex := s.connect(t, "tenant_acme"), s.connect(t, "tenant_globex")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// acme runs a session that writes memory, and reads its own result and events.
	acmeEvents, err := acme.nc.SubscribeSync("herald.tenant.acme.>")
	require.NoError(t, err)
	acmeTask := proto.Task{Prompt: acmePrompt, SessionID: "s-acme", TaskID: "t-acme"}
	require.NoError(t, bus.PublishJSON(ctx, acme.js, bus.TenantTasks("acme"), "", acmeTask))
	res := tenantResult(t, s, acme, "acme", acmeTask.SessionID)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	ev, err := acmeEvents.NextMsg(10 * time.Second)
	require.NoError(t, err, "acme receives its own session's events")
	require.Equal(t, bus.TenantSessionEvents("acme", "s-acme"), ev.Subject)

	// globex cannot read acme's results or events, live or replayed.
	for _, subj := range []string{"herald.tenant.acme.>", "herald.session.*.result", "herald.session.*.events", "herald.tenant.*.session.*.result"} {
		_, err := globex.nc.SubscribeSync(subj)
		require.NoError(t, err)
		globex.requireDenied("subscription", subj)
	}
	// A refused API call gets no answer: each attempt waits out a short context.
	_, err = globex.js.OrderedConsumer(shortCtx(t), bus.StreamSessions, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.TenantSessionResult("acme", "s-acme")}})
	require.Error(t, err, "globex replays acme's results")
	globex.requireDeniedWith("$JS.API.CONSUMER.CREATE.SESSIONS.", ".herald.tenant.acme.session.s-acme.result")
	_, err = globex.js.OrderedConsumer(shortCtx(t), bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.TenantSessionEvents("acme", "s-acme")}})
	require.Error(t, err, "globex replays acme's events")
	globex.requireDeniedWith("$JS.API.CONSUMER.CREATE.EVENTS.", ".herald.tenant.acme.session.s-acme.events")
	// ... nor read them by subject, nor publish as acme (tasks, interrupts,
	// answers) or as nobody's tenant.
	for _, subj := range []string{"$JS.API.STREAM.MSG.GET.SESSIONS", bus.TenantTasks("acme"), bus.TasksSubject,
		bus.SessionInterrupt("s-acme"), bus.TenantSessionInterrupt("acme", "s-acme"), bus.TenantSessionInput("acme", "s-acme"),
		"herald.tenant.acme.session.s-acme.result"} {
		require.NoError(t, globex.nc.Publish(subj, []byte(`{"prompt":"as acme","tenant":"acme"}`)))
		globex.requireDenied("publish", subj)
	}

	// globex's own session, reaching for acme's memory, finds nothing of it.
	globexTask := proto.Task{Prompt: globexPrompt, SessionID: "s-globex", TaskID: "t-globex"}
	require.NoError(t, bus.PublishJSON(context.Background(), globex.js, bus.TenantTasks("globex"), "", globexTask))
	res = tenantResult(t, s, globex, "globex", globexTask.SessionID)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	tools := transcriptTools(t, s, globexTask.SessionID)
	require.Len(t, tools, 2)
	require.Contains(t, tools[0], `"success":true`, "globex's memory read ran")
	require.Contains(t, tools[1], `"success":true`, "globex's session search ran")
	for _, content := range tools {
		require.NotContains(t, content, "zanzibar-7", "globex saw acme's memory: %s", content)
	}
	require.Contains(t, strings.Join(transcriptTools(t, s, acmeTask.SessionID), "\n"), `"success":true`)
	requireNoDeadLetters(t, admin.js)
}

// requireDeniedWith waits for a refused publish to a subject that starts
// with prefix and ends with suffix (API subjects carrying a random name).
func (c *conn) requireDeniedWith(prefix, suffix string) {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for _, err := range c.errors() {
			msg := err.Error()
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(msg, prefix) && strings.Contains(msg, suffix) {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "no permission violation for %s...%s; errors: %v", prefix, suffix, c.errors())
}
