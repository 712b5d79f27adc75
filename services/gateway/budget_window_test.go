package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// testClock is the injected clock of budget windows.
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *testClock) Now() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Add(d time.Duration)    { c.ns.Add(int64(d)) }
func (c *testClock) Set(t time.Time)        { c.ns.Store(t.UnixNano()) }
func (c *testClock) tune(cfg *Config)       { cfg.Now = c.Now }
func (c *testClock) tuneAll() func(*Config) { return c.tune }

// inFlight tracks the provider requests the scripted model is answering.
type inFlight struct {
	mu        sync.Mutex
	intervals [][2]time.Time
}

// script answers every request with a fixed usage after delay, and notes
// the time it is busy with it.
func (f *inFlight) script(usage scripted.Usage, delay time.Duration) scripted.Script {
	return func(*scripted.Request) scripted.Reply {
		now := time.Now()
		f.mu.Lock()
		f.intervals = append(f.intervals, [2]time.Time{now, now.Add(delay)})
		f.mu.Unlock()
		u := usage
		return scripted.Reply{Content: "ok", Usage: &u, Delay: delay}
	}
}

// max is the most requests the model was answering at once.
func (f *inFlight) max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, iv := range f.intervals {
		edges = append(edges, edge{iv[0], 1}, edge{iv[1], -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	n, top := 0, 0
	for _, e := range edges {
		n += e.delta
		top = max(top, n)
	}
	return top
}

// startGateway starts one more gateway process (its own connection and
// state) on r's bus with r's configuration.
func (r *rig) startGateway(name string) *Service {
	r.t.Helper()
	nc, js := r.bus.Connect(r.t, name)
	svc, err := New(r.cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(r.t), Config: config.Default()})
	require.NoError(r.t, err)
	require.NoError(r.t, svc.Start(context.Background()))
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = svc.Shutdown(ctx)
	})
	return svc
}

// ask publishes one request of session sid (its n-th call) and waits for
// the answer on the reply subject, without the test's require (it runs in
// goroutines).
func (r *rig) ask(sid string, n int, tune func(*heraldpb.LLMRequest)) (*heraldpb.LLMResponse, error) {
	req := &heraldpb.LLMRequest{
		RequestId: fmt.Sprintf("%s:1:%d:main", sid, n), SessionId: sid, TaskId: "task-" + sid, Purpose: "agent",
		Step: int32(n), Turn: 1, ReplySubject: bus.LLMResponse(bus.OwnerLoop, sid), MaxOutputTokens: 100,
		Messages: []*heraldpb.ChatMessage{{Role: "user", Content: "count"}},
	}
	if tune != nil {
		tune(req)
	}
	sub, err := r.bus.NC.SubscribeSync(req.GetReplySubject())
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := r.bus.NC.Flush(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.PublishProto(ctx, r.bus.JS, bus.LLMRequest(sid), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("no answer to %s: %w", req.GetRequestId(), err)
		}
		got := &heraldpb.LLMResponse{}
		if bus.Decode(m.Data, got) == nil && got.GetRequestId() == req.GetRequestId() {
			return got, nil
		}
	}
}

// budgetAlerts reads every alert stored on herald.alerts.budget.
func budgetAlertsOn(t testing.TB, js jetstream.JetStream) []proto.BudgetAlert {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.StreamAlerts)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []proto.BudgetAlert
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		require.Equal(t, bus.BudgetAlertsSubject, m.Subject)
		var a proto.BudgetAlert
		require.NoError(t, json.Unmarshal(m.Data, &a))
		out = append(out, a)
	}
	return out
}

// The demonstration: 50 sessions of one tenant, all calling at
// once through two gateway processes, against a daily cap worth 25 calls.
// What they spend together stays within the cap plus the calls in flight
// when it was reached, each threshold is alerted exactly once, every
// session ends refused with the window named, and the next day (injected
// clock) the window is open again.
func TestDailyWindowHoldsUnderConcurrencyAcrossTwoGateways(t *testing.T) {
	const (
		sessions = 50
		capUSD   = 0.05
	)
	clock := newTestClock(time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC))
	flight := &inFlight{}
	// 5 input tokens at $1/M and 100 output tokens at $10/M: $0.001005 a call
	usage := scripted.Usage{PromptTokens: 5, CompletionTokens: 100}
	r := newRig(t, flight.script(usage, 30*time.Millisecond), clock.tune, func(c *Config) {
		c.Pricing = map[string]config.Price{"m1": {Input: 1, Output: 10}}
		c.Budgets = config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Daily: capUSD}}}
		c.Concurrency = 32
	})
	r.startGateway("gateway-2")
	const perCall = uint64(1_005_000) // nano-USD

	alertsBefore := map[string]float64{}
	for _, th := range []string{"50", "75", "90", "100"} {
		alertsBefore[th] = alertMetric(t, "acme", "daily", th)
	}
	var wg sync.WaitGroup
	refusals := make(chan string, sessions)
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("s%02d", i)
			for n := 1; n <= 10; n++ {
				resp, err := r.ask(sid, n, func(q *heraldpb.LLMRequest) { q.Tenant = "acme" })
				if err != nil {
					errs <- err
					return
				}
				if resp.GetErrorClass() != "" {
					if resp.GetErrorClass() != string(ClassBudgetExceeded) {
						errs <- fmt.Errorf("%s: %s: %s", sid, resp.GetErrorClass(), resp.GetError())
					}
					refusals <- resp.GetError()
					return
				}
			}
			errs <- fmt.Errorf("%s was never refused", sid)
		}()
	}
	wg.Wait()
	close(errs)
	close(refusals)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, refusals, sessions, "every session ends refused by the window")
	for msg := range refusals {
		require.Contains(t, msg, `tenant "acme" daily window 2026-12-03 ($0.0500) is used up`)
	}

	var spent uint64
	for _, ev := range r.usageEvents() {
		spent += ev.GetCostNanoUsd()
	}
	capNano := uint64(capUSD * nanoPerUSD)
	inflight := flight.max()
	overspend := int64(spent) - int64(capNano)
	t.Logf("spent $%.6f against a $%.2f daily cap: overspend $%.6f (%d calls); at most %d calls were in flight at once",
		float64(spent)/nanoPerUSD, capUSD, float64(overspend)/nanoPerUSD, spent/perCall, inflight)
	require.GreaterOrEqual(t, spent, capNano, "the window is used, not refused early")
	require.LessOrEqual(t, spent, capNano+uint64(inflight)*perCall, "at most the calls in flight go over")
	require.Less(t, spent, capNano+perCall, "each call's hold covers its cost here, so not even one whole call goes over")
	require.Greater(t, inflight, 1, "calls did run at once")

	alerts := budgetAlertsOn(t, r.bus.JS)
	var thresholds []float64
	for _, a := range alerts {
		require.Equal(t, "acme", a.Tenant)
		require.Equal(t, "tenant", a.Scope)
		require.Equal(t, "daily", a.Window)
		require.Equal(t, "2026-12-03", a.Period)
		require.Equal(t, capUSD, a.Limit)
		require.GreaterOrEqual(t, a.Spent*100, a.Threshold*capUSD-1e-9, "alerted once crossed: %+v", a)
		thresholds = append(thresholds, a.Threshold)
	}
	sort.Float64s(thresholds)
	require.Equal(t, []float64{50, 75, 90, 100}, thresholds, "each threshold alerted exactly once across both gateways")
	for th, before := range alertsBefore {
		require.Equal(t, before+1, alertMetric(t, "acme", "daily", th), "herald_budget_alerts_total counts threshold %s once", th)
	}

	// the next day (in UTC) opens a fresh window
	clock.Set(time.Date(2026, 12, 4, 0, 0, 1, 0, time.UTC))
	resp, err := r.ask("next-day", 1, func(q *heraldpb.LLMRequest) { q.Tenant = "acme" })
	require.NoError(t, err)
	require.Empty(t, resp.GetError())
	require.Len(t, budgetAlertsOn(t, r.bus.JS), 4, "a fresh window below its thresholds alerts nothing")
}

// alertMetric reads herald_budget_alerts_total of tenant's window and
// threshold from the Prometheus text this process serves.
func alertMetric(t *testing.T, tenant, window, threshold string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	telemetry.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := fmt.Sprintf(`herald_budget_alerts_total{id=%q,scope="tenant",tenant=%q,threshold=%q,window=%q} `, tenant, tenant, threshold, window)
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, want); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

// A call refused by its window sends the 100 % alert, marked refused, even
// when 100 is not among the thresholds; a tenant's total (the earlier
// lifetime form) and a key's window are enforced alike.
func TestARefusedCallAlertsAHundredPercent(t *testing.T) {
	usage := &scripted.Usage{PromptTokens: 1_200_000}
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "x", Usage: usage}), func(c *Config) {
		c.Pricing = map[string]config.Price{"m1": {Input: 1}}
		c.Budgets = config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Total: 1}},
			Keys: map[string]config.BudgetLimits{"key_a": {Daily: 1}}, AlertThresholds: []float64{50}}
	})
	ask := func(tenant, key string) *heraldpb.LLMResponse {
		req := r.request("r-"+tenant+key, "hello")
		req.Tenant, req.ApiKeyId = tenant, key
		return r.call(req)
	}
	require.Empty(t, ask("acme", "").GetError(), "$1.20 of $1: the first call was allowed")
	resp := ask("acme", "")
	require.Equal(t, string(ClassBudgetExceeded), resp.GetErrorClass())
	require.Contains(t, resp.GetError(), `the tenant "acme" total budget ($1.0000) is used up: $1.2000 spent of $1.0000`)

	require.Empty(t, ask("globex", "key_a").GetError())
	resp = ask("globex", "key_a")
	require.Equal(t, string(ClassBudgetExceeded), resp.GetErrorClass())
	require.Contains(t, resp.GetError(), `the key "key_a" daily window `)
	require.Empty(t, ask("globex", "").GetError(), "the key's window caps the key's calls only")

	got := map[string]proto.BudgetAlert{}
	for _, a := range budgetAlertsOn(t, r.bus.JS) {
		got[fmt.Sprintf("%s/%s/%v", a.Scope, a.Window, a.Threshold)] = a
	}
	require.Len(t, got, 4, "%v", got)
	require.False(t, got["tenant/total/50"].Refused)
	require.True(t, got["tenant/total/100"].Refused, "a refused call alerts 100 %%")
	require.Equal(t, "all", got["tenant/total/100"].Period)
	require.InDelta(t, 1.2, got["tenant/total/100"].Spent, 1e-9)
	require.True(t, got["key/daily/100"].Refused)
	require.Equal(t, "globex", got["key/daily/100"].Tenant, "a key's alert names the tenant of the call")
}
