package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// TestA429PausesAnUnlimitedProviderForEveryGateway: a provider with no
// limits in herald.yaml answers one gateway's call with 429 and
// Retry-After: 2. The other gateway, which was never refused, holds its
// calls to the provider too: none reaches it during the pause (before, it
// sent them at once: a retry storm across processes), each waiting call
// says queued, and all are answered once the pause is over.
func TestA429PausesAnUnlimitedProviderForEveryGateway(t *testing.T) {
	const retryAfter = 2 * time.Second
	var n atomic.Int32
	r := newRig(t, func(*scripted.Request) scripted.Reply {
		if n.Add(1) == 1 {
			// answered late, so the second gateway is up when it comes
			return scripted.Reply{Status: 429, Header: map[string]string{"Retry-After": "2"}, Delay: time.Second,
				Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}
		}
		return scripted.Reply{Content: "ok", Delay: 20 * time.Millisecond}
	})
	first := r.request("s-refused", "hello")
	refused := r.watch(first.GetSessionId())
	r.publish(first)
	require.Eventually(t, func() bool { return len(r.model.Requests()) == 1 }, 5*time.Second, time.Millisecond, "the first gateway asked the model")

	nc, js := r.bus.Connect(t, "gateway-2")
	other, err := New(r.cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t), Config: config.Default()})
	require.NoError(t, err)
	require.NoError(t, other.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = other.Shutdown(ctx)
	})

	require.Eventually(t, func() bool { return len(refused.ofType(proto.EventRetry)) == 1 }, 5*time.Second, time.Millisecond, "the 429 came back")
	refusedAt := time.Now()
	// the first gateway goes away: from now on only the second one, never
	// refused itself, takes calls (the refused call too, handed back)
	stopCtx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = r.svc.Shutdown(stopCtx)
	cancel()

	const calls = 6
	reqs := make([]*heraldpb.LLMRequest, calls)
	watched := make([]*events, calls)
	for i := range reqs {
		reqs[i] = r.request(fmt.Sprintf("s-after-%d", i), "hello")
		watched[i] = r.watch(reqs[i].GetSessionId())
		r.publish(reqs[i])
	}
	for _, req := range append(reqs, first) {
		require.Empty(t, r.awaitResponse(req, 20*time.Second).GetError())
	}
	require.Positive(t, other.counters.attempts.Load(), "the second gateway sent the calls")

	model := r.model.Requests()
	require.Greater(t, len(model), calls, "every call reached the model in the end")
	pauseEnd := refusedAt.Add(retryAfter)
	for _, q := range model[1:] {
		require.False(t, q.Arrived.Before(pauseEnd.Add(-150*time.Millisecond)),
			"a call reached the provider %s into its 2 s pause", q.Arrived.Sub(refusedAt))
	}
	for i, w := range watched {
		evs := w.ofType(proto.EventQueued)
		require.NotEmpty(t, evs, "call %d said it waited", i)
		require.Equal(t, proto.LimitPause, evs[0].Limit)
	}
}
