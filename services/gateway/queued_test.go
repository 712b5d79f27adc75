package gateway

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// requireOncePerChange fails when a call's queued events repeat
// themselves: a waiting call is tried again every few tens of
// milliseconds, and each try must not become an event.
func requireOncePerChange(t *testing.T, evs []proto.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		same := evs[i].RequestID == evs[i-1].RequestID && evs[i].Limit == evs[i-1].Limit && evs[i].Position == evs[i-1].Position &&
			evs[i].Provider == evs[i-1].Provider
		require.False(t, same, "queued event %d repeats the one before: %+v", i, evs[i])
	}
}

// A tenant's model calls beyond its max_concurrent_model_calls wait, and
// their sessions' events say so, with their place, once per change of
// place (the call is tried again every 200 ms while it waits).
func TestModelCallsBeyondATenantsLimitSayQueued(t *testing.T) {
	r := buildRig(t, func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Content: "ok", Delay: 400 * time.Millisecond}
	})
	r.svc.tenants.Tenants = map[string]config.TenantLimits{"acme": {MaxConcurrentModelCalls: 1}}
	r.start()

	const calls = 3
	reqs := make([]*heraldpb.LLMRequest, calls)
	watched := make([]*events, calls)
	for i := range reqs {
		reqs[i] = r.request(fmt.Sprintf("s-acme-%d", i), "hello")
		reqs[i].Tenant = "acme"
		watched[i] = r.watch(reqs[i].GetSessionId())
	}
	for _, req := range reqs {
		r.publish(req)
	}
	for _, req := range reqs {
		require.Empty(t, r.awaitResponse(req, 20*time.Second).GetError())
	}
	require.Equal(t, 1, peakInFlight(r.model.Requests()), "one call of acme's at a time")

	var waited int
	for i, w := range watched {
		evs := w.ofType(proto.EventQueued)
		requireOncePerChange(t, evs)
		for _, ev := range evs {
			require.Equal(t, proto.LimitModelCalls, ev.Limit)
			require.Equal(t, reqs[i].GetRequestId(), ev.RequestID)
			require.Equal(t, reqs[i].GetTaskId(), ev.TaskID)
			require.Positive(t, ev.Position)
			require.LessOrEqual(t, ev.Position, calls-1)
			require.Contains(t, ev.Message, "tenant acme")
			require.Contains(t, ev.Message, "max_concurrent_model_calls")
		}
		if len(evs) > 0 {
			waited++
			require.LessOrEqual(t, len(evs), 3, "session %d: one event per change of place, not one per try: %+v", i, evs)
			require.Equal(t, 1, evs[len(evs)-1].Position, "session %d went from position 1: %+v", i, evs)
		}
	}
	require.Equal(t, calls-1, waited, "every call but the first waited and said so")
}

// A provider's 429 with Retry-After pauses its calls; a call that waits
// for the pause says so on its session's events, naming the provider and
// the limit, once (the gate is looked at again and again while it waits).
// The refused call itself says retry, with the wait it was asked for.
func TestCallsWaitingForAProvidersPauseSayQueued(t *testing.T) {
	var n atomic.Int32
	r := newRig(t, func(*scripted.Request) scripted.Reply {
		if n.Add(1) == 1 {
			return scripted.Reply{Status: 429, Header: map[string]string{"Retry-After": "2"},
				Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}
		}
		return scripted.Text("ok")
	}, func(c *Config) { c.Primary.APIKey = "sk-secret-key-never-shown" })
	first := r.request("s-first", "hello")
	w1 := r.watch(first.GetSessionId())
	r.publish(first)
	require.Eventually(t, func() bool { return len(w1.ofType(proto.EventRetry)) > 0 }, 5*time.Second, 5*time.Millisecond)
	second := r.request("s-second", "hello")
	w2 := r.watch(second.GetSessionId())
	r.publish(second)
	require.Empty(t, r.awaitResponse(first, 10*time.Second).GetError())
	require.Empty(t, r.awaitResponse(second, 10*time.Second).GetError())
	require.Len(t, r.model.Requests(), 3, "the 429, then each call once")

	// the pause, then (the 429 halved this gateway's cap to one call, which
	// the refused call's retry may hold) perhaps the cap: one event each
	evs := w2.ofType(proto.EventQueued)
	requireOncePerChange(t, evs)
	require.NotEmpty(t, evs)
	require.LessOrEqual(t, len(evs), 2, "one queued event for the whole pause: %+v", evs)
	if len(evs) == 2 {
		require.Equal(t, proto.LimitGatewayCap, evs[1].Limit)
		require.Contains(t, evs[1].Message, "provider local")
	}
	ev := evs[0]
	require.Equal(t, proto.LimitPause, ev.Limit)
	require.Equal(t, "local", ev.Provider)
	require.Equal(t, "m1", ev.Model)
	require.Equal(t, second.GetRequestId(), ev.RequestID)
	require.Zero(t, ev.Position, "no queue, no position")
	require.Contains(t, ev.Message, "provider local")
	require.NotContains(t, ev.Message, "sk-secret")
	// the refused call's retry event said how long it waits; it may then
	// wait for the halved cap the second call holds, not for the pause
	for _, ev := range w1.ofType(proto.EventQueued) {
		require.Equal(t, proto.LimitGatewayCap, ev.Limit)
	}
}

// A call waiting for its provider's max_concurrent, held across two
// gateways, says so once while the gateway looks at the shared record
// every 50 ms.
func TestCallsWaitingForAProvidersMaxConcurrentSayQueued(t *testing.T) {
	r, _ := twoGateways(t, func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Content: "ok", Delay: 300 * time.Millisecond}
	}, limited(config.ProviderProfile{MaxConcurrent: 1}))
	const calls = 4
	reqs := make([]*heraldpb.LLMRequest, calls)
	watched := make([]*events, calls)
	for i := range reqs {
		reqs[i] = r.request(fmt.Sprintf("s-mc-%d", i), "hello")
		watched[i] = r.watch(reqs[i].GetSessionId())
	}
	for _, req := range reqs {
		r.publish(req)
	}
	for _, req := range reqs {
		require.Empty(t, r.awaitResponse(req, 20*time.Second).GetError())
	}
	require.Equal(t, 1, peakInFlight(r.model.Requests()))
	waited := 0
	for _, w := range watched {
		evs := w.ofType(proto.EventQueued)
		if len(evs) == 0 {
			continue
		}
		waited++
		require.Len(t, evs, 1, "one event for the wait, not one per look at the shared record: %+v", evs)
		require.Equal(t, proto.LimitProviderCalls, evs[0].Limit)
		require.Equal(t, "local", evs[0].Provider)
		require.True(t, strings.Contains(evs[0].Message, "max_concurrent"), evs[0].Message)
	}
	require.GreaterOrEqual(t, waited, calls-2, "calls beyond the one in flight (one per gateway may pass its own gate first) waited and said so")
}
