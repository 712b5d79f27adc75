package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	protobuf "google.golang.org/protobuf/proto"
)

// rig is a running gateway on a real bus, talking to a scripted model server.
type rig struct {
	t      testing.TB
	bus    *heraldtest.Bus
	model  *scripted.Server
	svc    *Service
	cfg    Config
	nextID int
}

// fastRetry keeps backoff in milliseconds so tests stay quick.
var fastRetry = config.Retry{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
	RateBaseDelay: time.Millisecond, RateMaxDelay: 5 * time.Millisecond, CallTimeout: 10 * time.Second}

func startModel(t testing.TB, script scripted.Script) *scripted.Server {
	t.Helper()
	srv, err := scripted.Start(script)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

// newRig starts a bus, a scripted model serving script and a gateway whose
// primary is that model; tune adjusts the gateway's configuration.
func newRig(t testing.TB, script scripted.Script, tune ...func(*Config)) *rig {
	t.Helper()
	r := buildRig(t, script, tune...)
	r.start()
	return r
}

// buildRig is newRig without starting the gateway.
func buildRig(t testing.TB, script scripted.Script, tune ...func(*Config)) *rig {
	t.Helper()
	b := heraldtest.StartBus(t)
	model := startModel(t, script)
	cfg := Config{
		Primary:     config.Provider{Provider: "local", Model: "m1", BaseURL: model.URL},
		MaxAttempts: 3,
		Retry:       fastRetry,
		Tenant:      "t1",
	}
	for _, f := range tune {
		f(&cfg)
	}
	nc, js := b.Connect(t, "gateway")
	svc, err := New(cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t), Config: config.Default()})
	require.NoError(t, err)
	return &rig{t: t, bus: b, model: model, svc: svc, cfg: cfg}
}

func (r *rig) start() {
	r.t.Helper()
	require.NoError(r.t, r.svc.Start(context.Background()))
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.svc.Shutdown(ctx)
	})
}

// request builds a request of session sid asking about prompt.
func (r *rig) request(sid, prompt string) *heraldpb.LLMRequest {
	r.nextID++
	return &heraldpb.LLMRequest{
		RequestId:    fmt.Sprintf("%s:1:%d:main", sid, r.nextID),
		SessionId:    sid,
		TaskId:       "task-" + sid,
		Purpose:      "agent",
		Step:         int32(r.nextID),
		Turn:         1,
		ReplySubject: bus.LLMResponse(bus.OwnerLoop, sid),
		Messages: []*heraldpb.ChatMessage{
			{Role: "system", Content: "You are terse."},
			{Role: "user", Content: prompt},
		},
	}
}

func (r *rig) publish(req *heraldpb.LLMRequest) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(r.t, bus.PublishProto(ctx, r.bus.JS, bus.LLMRequest(req.GetSessionId()), req.GetRequestId(), req))
}

// call publishes req and waits for its response.
func (r *rig) call(req *heraldpb.LLMRequest) *heraldpb.LLMResponse {
	r.t.Helper()
	r.publish(req)
	return r.awaitResponse(req, 10*time.Second)
}

func (r *rig) awaitResponse(req *heraldpb.LLMRequest, within time.Duration) *heraldpb.LLMResponse {
	r.t.Helper()
	var resp *heraldpb.LLMResponse
	require.Eventually(r.t, func() bool {
		m, err := bus.LastOnSubject(context.Background(), r.bus.JS, bus.StreamLLMResponses, req.GetReplySubject())
		if err != nil {
			return false
		}
		got := &heraldpb.LLMResponse{}
		if bus.Decode(m.Data, got) != nil || got.GetRequestId() != req.GetRequestId() {
			return false
		}
		resp = got
		return true
	}, within, 2*time.Millisecond, "no response to %s", req.GetRequestId())
	return resp
}

// usageEvents returns every usage event stored so far (nothing consumes
// the USAGE work queue in these tests).
func (r *rig) usageEvents() []*heraldpb.UsageEvent {
	r.t.Helper()
	return streamProtos(r.t, r.bus.JS, bus.StreamUsage, func() *heraldpb.UsageEvent { return &heraldpb.UsageEvent{} })
}

func streamProtos[T protobuf.Message](t testing.TB, js jetstream.JetStream, stream string, mk func() T) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []T
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		v := mk()
		require.NoError(t, bus.Decode(m.Data, v))
		out = append(out, v)
	}
	return out
}

// events collects a session's progress events as they are published.
type events struct {
	mu  sync.Mutex
	all []proto.Event
}

func (r *rig) watch(sid string) *events {
	r.t.Helper()
	e := &events{}
	sub, err := r.bus.NC.Subscribe(bus.SessionEvents(sid), func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			e.mu.Lock()
			e.all = append(e.all, ev)
			e.mu.Unlock()
		}
	})
	require.NoError(r.t, err)
	require.NoError(r.t, r.bus.NC.Flush())
	r.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return e
}

func (e *events) ofType(typ string) []proto.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []proto.Event
	for _, ev := range e.all {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func (e *events) text() string {
	s := ""
	for _, ev := range e.ofType(proto.EventDelta) {
		s += ev.Delta
	}
	return s
}

// takeAndDie has a gateway that is about to die take n requests; die hands
// them back unacknowledged, as the server does once that gateway is gone.
func (r *rig) takeAndDie(n int) (die func()) {
	r.t.Helper()
	crashed, err := r.bus.JS.CreateOrUpdateConsumer(context.Background(), bus.StreamLLMRequests, jetstream.ConsumerConfig{
		Durable: Durable, FilterSubject: bus.LLMRequest(">"), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 4096})
	require.NoError(r.t, err)
	batch, err := crashed.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(r.t, err)
	return func() {
		r.t.Helper()
		for m := range batch.Messages() {
			require.NoError(r.t, m.Nak())
		}
	}
}

// storeAnswerWithUsage stores the answer a gateway that then died gave req,
// carrying the one usage event (costing nano) it billed and never stored.
func (r *rig) storeAnswerWithUsage(req *heraldpb.LLMRequest, nano uint64) *heraldpb.UsageEvent {
	r.t.Helper()
	billed := &heraldpb.UsageEvent{EventId: req.GetRequestId() + ":1", Tenant: "t1", SessionId: req.GetSessionId(),
		TaskId: req.GetTaskId(), Model: "m1", CostNanoUsd: nano, Status: StatusOK, Usage: &heraldpb.Usage{InputTokens: 12, OutputTokens: 3}}
	earlier := &heraldpb.LLMResponse{RequestId: req.GetRequestId(), SessionId: req.GetSessionId(),
		Message: &heraldpb.ChatMessage{Role: "assistant", Content: "from before the crash"}, UsageEvents: []*heraldpb.UsageEvent{billed}}
	require.NoError(r.t, bus.PublishProto(context.Background(), r.bus.JS, req.GetReplySubject(), req.GetRequestId(), earlier))
	return billed
}

// requestsDrained waits until every LLM request is acknowledged.
func (r *rig) requestsDrained(why string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		n, err := bus.PendingWork(context.Background(), r.bus.JS, bus.StreamLLMRequests)
		return err == nil && n == 0
	}, 10*time.Second, 5*time.Millisecond, why)
}
