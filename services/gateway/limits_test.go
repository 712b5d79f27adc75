package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// limited gives the rig's provider ("local") the limits of prof.
func limited(prof config.ProviderProfile) func(*Config) {
	return func(c *Config) { c.Profiles = map[string]config.ProviderProfile{"local": prof} }
}

// twoGateways starts a rig and a second gateway process on the same bus
// (its own connection), both taking LLM requests from the shared consumer.
func twoGateways(t *testing.T, script scripted.Script, tune ...func(*Config)) (*rig, *Service) {
	t.Helper()
	r := newRig(t, script, tune...)
	nc, js := r.bus.Connect(t, "gateway-2")
	other, err := New(r.cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t), Config: config.Default()})
	require.NoError(t, err)
	require.NoError(t, other.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = other.Shutdown(ctx)
	})
	return r, other
}

// burst publishes n requests at once and waits for every answer, which must
// be an answer, not an error: work beyond a limit waits.
func (r *rig) burst(n int, within time.Duration) {
	r.t.Helper()
	reqs := make([]*heraldpb.LLMRequest, n)
	for i := range reqs {
		reqs[i] = r.request(fmt.Sprintf("s-burst-%d", i), "hello")
		r.publish(reqs[i])
	}
	for _, req := range reqs {
		resp := r.awaitResponse(req, within)
		require.Empty(r.t, resp.GetError(), "request %s failed instead of waiting", req.GetRequestId())
	}
}

func peakInFlight(reqs []*scripted.Request) int {
	peak := 0
	for _, q := range reqs {
		peak = max(peak, q.InFlight)
	}
	return peak
}

func TestMaxConcurrentHoldsAcrossTwoGateways(t *testing.T) {
	script := func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Content: "ok", Delay: 150 * time.Millisecond}
	}
	r, other := twoGateways(t, script, limited(config.ProviderProfile{MaxConcurrent: 3}))
	r.burst(24, 30*time.Second)

	reqs := r.model.Requests()
	require.Len(t, reqs, 24)
	require.Equal(t, 3, peakInFlight(reqs), "never more than max_concurrent at the provider, and the limit is used")
	require.Positive(t, r.svc.counters.attempts.Load(), "the first gateway served calls")
	require.Positive(t, other.counters.attempts.Load(), "the second gateway served calls")
}

func TestRPMHoldsAcrossTwoGateways(t *testing.T) {
	const rpm = 120 // one call every 500 ms, two at once
	every := time.Minute / rpm
	r, other := twoGateways(t, func(*scripted.Request) scripted.Reply { return scripted.Text("ok") },
		limited(config.ProviderProfile{RPM: rpm}))
	// both gateways connect to the provider first: a first call's dial
	// delays its arrival, not its start
	r.burst(4, 30*time.Second)
	warm := len(r.model.Requests())
	r.burst(7, 30*time.Second)

	var at []time.Time
	for _, q := range r.model.Requests()[warm:] {
		at = append(at, q.Arrived)
	}
	require.Len(t, at, 7)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	// GCRA with a burst of b: calls i and j > i start at least (j-i-b+1)
	// intervals apart, so no minute holds more than rpm + b - 1 calls.
	const burst = 2
	slack := every / 4 // a call started on time may still arrive late on a loaded machine
	for i := range at {
		for j := i + burst; j < len(at); j++ {
			want := time.Duration(j-i-burst+1) * every
			require.GreaterOrEqual(t, at[j].Sub(at[i]), want-slack, "calls %d and %d came %s apart", i, j, at[j].Sub(at[i]))
		}
	}
	require.GreaterOrEqual(t, at[6].Sub(at[0]), 5*every-slack, "seven calls at 120 a minute take 2.5 s")
	require.Positive(t, r.svc.counters.attempts.Load())
	require.Positive(t, other.counters.attempts.Load())
}

// patientRetries gives a call enough attempts that the burst's six 429s
// cannot all fall on one call (agent.api_max_retries still ends a call a
// provider keeps refusing).
func patientRetries(c *Config) { c.MaxAttempts = 8 }

// refuseBurst is a provider that answers calls refuseFrom to
// refuseFrom+refused-1 with 429 and Retry-After: 1, the calls before them
// after 100 ms and the calls after them after 250 ms. The longer answers
// after the pause let a climb back to the limit show as that many calls at
// the provider at once: a freed slot is taken again within a few
// milliseconds, but on a loaded machine not always within the shortest
// remaining answer of the others.
func refuseBurst(refuseFrom, refused int32) scripted.Script {
	var n atomic.Int32
	return func(*scripted.Request) scripted.Reply {
		k := n.Add(1)
		switch {
		case k >= refuseFrom && k < refuseFrom+refused:
			return scripted.Reply{Status: 429, Header: map[string]string{"Retry-After": "1"},
				Body: `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`}
		case k >= refuseFrom+refused:
			return scripted.Reply{Content: "ok", Delay: 250 * time.Millisecond}
		}
		return scripted.Reply{Content: "ok", Delay: 100 * time.Millisecond}
	}
}

// TestRateLimitsSlowTheProviderDownAndRecover: a provider at capacity (8 in
// flight across two gateways, max_concurrent) answers six calls with 429
// and Retry-After: 1. Every gateway holds off for the second it asked for
// (no call arrives in it: no retry storm), starts again with half the calls
// at once, climbs back to the limit, and every call is answered in the end.
func TestRateLimitsSlowTheProviderDownAndRecover(t *testing.T) {
	const limit, calls, refuseFrom, refused = 8, 160, 41, 6
	r, _ := twoGateways(t, refuseBurst(refuseFrom, refused), limited(config.ProviderProfile{MaxConcurrent: limit}), patientRetries)
	r.burst(calls, 60*time.Second)
	requireSlowedDownAndRecovered(t, r.model.Requests(), limit, calls, refuseFrom, refused)
}

// TestRateLimitsSlowAnUnlimitedProviderDown: with no limit in herald.yaml
// the gateway process does the same with its own cap (--concurrency).
func TestRateLimitsSlowAnUnlimitedProviderDown(t *testing.T) {
	const limit, calls, refuseFrom, refused = 8, 160, 41, 6
	r := newRig(t, refuseBurst(refuseFrom, refused), func(c *Config) { c.Concurrency = limit }, patientRetries)
	r.burst(calls, 60*time.Second)
	requireSlowedDownAndRecovered(t, r.model.Requests(), limit, calls, refuseFrom, refused)
}

func requireSlowedDownAndRecovered(t *testing.T, reqs []*scripted.Request, limit, calls, refuseFrom, refused int) {
	t.Helper()
	slices.SortFunc(reqs, func(a, b *scripted.Request) int { return a.Arrived.Compare(b.Arrived) })
	require.Equal(t, calls+refused, len(reqs), "each refused call was sent once more, no more")
	require.LessOrEqual(t, peakInFlight(reqs), limit)
	require.Greater(t, peakInFlight(reqs[:refuseFrom-1]), limit/2, "near capacity before the 429s")

	first429 := reqs[refuseFrom-1].Arrived
	pauseEnd := first429.Add(time.Second)
	var inPause, after []*scripted.Request
	for _, q := range reqs[refuseFrom-1:] {
		switch {
		case q.Arrived.After(first429.Add(300*time.Millisecond)) && q.Arrived.Before(pauseEnd.Add(-200*time.Millisecond)):
			inPause = append(inPause, q)
		case q.Arrived.After(pauseEnd.Add(-200 * time.Millisecond)):
			after = append(after, q)
		}
	}
	for _, q := range inPause {
		t.Errorf("a call reached the provider %s after the first 429 (Retry-After: 1), %d in flight", q.Arrived.Sub(first429), q.InFlight)
	}
	require.Greater(t, len(after), limit)
	// the first calls after the pause: one more than half the limit can only
	// start once one of them is answered
	require.LessOrEqual(t, peakInFlight(after[:limit/2+1]), limit/2, "after the 429s half the calls at once")
	require.Equal(t, limit, peakInFlight(after), "and back up to the limit")
}
