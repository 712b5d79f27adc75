package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// startGateway runs a gateway of h's configuration on h's bus.
func startGateway(t *testing.T, h *H) *gateway.Service {
	t.Helper()
	svc, err := gateway.New(gateway.ConfigFrom(h.Config), service.Deps{NC: h.NC, JS: h.JS, Log: heraldtest.Logger(t), Config: h.Config, Instance: "test"})
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { stopGateway(t, svc) })
	return svc
}

func stopGateway(t *testing.T, svc *gateway.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, svc.Shutdown(ctx))
}

// TestRequestOfAFinishedStepIsNotSentAgainAfterAGatewayDies: a gateway took
// two requests and died before acking them: one for a step its session has
// long finished (its answer stored, the session over), one a session is
// waiting for. The next gateway sends only the second to the model, and the
// waiting session finishes; the real loop's session records say which is which.
func TestRequestOfAFinishedStepIsNotSentAgainAfterAGatewayDies(t *testing.T) {
	script := func(r *scripted.Request) scripted.Reply {
		if r.AssistantCount() == 0 {
			return scripted.Tool("write_file", `{"path":"`+r.FirstUser()+`.txt","content":"x"}`)
		}
		return scripted.Text("finished " + r.FirstUser())
	}
	h := Start(t, script, func(_ *config.Config, o *app.Options) {
		o.Services = slices.DeleteFunc(slices.Clone(service.Names), func(n string) bool { return n == "gateway" })
	})
	first := startGateway(t, h)
	done := NewTask("done")
	require.Equal(t, "finished done", h.Run(done).FinalResponse)
	require.Len(t, h.RequestsOf("done"), 2)
	stopGateway(t, first)

	// With no gateway running, a session waits for its first model call,
	// and a retry of the finished session's first step comes round, one
	// never answered (an answered one is found and not sent again either:
	// services/gateway TestARedeliveredRequestFindsItsAnswerAfterTheSessionMovedOn).
	waiting := NewTask("waiting")
	h.Submit(waiting)
	ctx := context.Background()
	again := &heraldpb.LLMRequest{RequestId: done.SessionID + ":1:1:1", SessionId: done.SessionID, TaskId: done.TaskID,
		Purpose: "agent", Step: 1, Turn: 1, ReplySubject: bus.LLMResponse(bus.OwnerLoop, done.SessionID),
		Messages: []*heraldpb.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "done"}}}
	require.NoError(t, bus.PublishProto(ctx, h.JS, bus.LLMRequest(done.SessionID), again.RequestId+":again", again))

	// A gateway takes both and dies before acknowledging either.
	crashed, err := h.JS.CreateOrUpdateConsumer(ctx, bus.StreamLLMRequests, jetstream.ConsumerConfig{
		Durable: gateway.Durable, FilterSubject: bus.LLMRequest(">"), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 4096})
	require.NoError(t, err)
	taken := map[uint64]bool{} // stream sequences: a nak'd message may come back first
	require.Eventually(t, func() bool {
		batch, err := crashed.FetchNoWait(2)
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			require.NoError(t, err)
			taken[meta.Sequence.Stream] = true
			require.NoError(t, m.Nak())
		}
		return len(taken) == 2
	}, 10*time.Second, 10*time.Millisecond, "both requests wait in the queue")

	next := startGateway(t, h)
	res := h.WaitResult(waiting, time.Minute)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	require.Equal(t, "finished waiting", res.FinalResponse)
	require.Eventually(t, func() bool { return next.Stats().Stale == 1 }, 10*time.Second, 10*time.Millisecond,
		"the finished step's request is dropped and counted")
	require.Len(t, h.RequestsOf("done"), 2, "the finished step was not sent to the model again")
	require.Len(t, h.RequestsOf("waiting"), 2, "the waiting session's call was sent, then its next step")
}
