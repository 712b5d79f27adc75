package deploytest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/heraldrun/herald/services/gateway"
	"github.com/stretchr/testify/require"
)

// Under the real deploy config the gateway's own user reserves and settles
// budget windows in herald_spend, publishes the alert on
// herald.alerts.budget and POSTs it to budgets.webhook through its shared
// consumer: nothing it does for budgets is refused by the server.
func TestGatewayUserKeepsBudgetsAndSendsAlerts(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	model, err := scripted.Start(scripted.Conversation(scripted.Reply{Content: "x", Usage: &scripted.Usage{PromptTokens: 600_000}}))
	require.NoError(t, err)
	t.Cleanup(model.Close)
	var mu sync.Mutex
	var posted []proto.BudgetAlert
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(gateway.HeaderWebhookSignature) != gateway.SignWebhook("whsec", body) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var a proto.BudgetAlert
		require.NoError(t, json.Unmarshal(body, &a))
		mu.Lock()
		posted = append(posted, a)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)

	gw := s.connect(t, "gateway")
	cfg := gateway.Config{Primary: config.Provider{Provider: "local", Model: "m1", BaseURL: model.URL},
		Pricing: map[string]config.Price{"m1": {Input: 1}},
		Budgets: config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Daily: 1}}, AlertThresholds: []float64{50},
			Webhook: config.BudgetWebhook{URL: hook.URL, Secret: "whsec"}}}
	svc, err := gateway.New(cfg, service.Deps{NC: gw.nc, JS: gw.js, Log: heraldtest.Logger(t), Config: config.Default()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })

	loop := s.connect(t, "loop")
	req := &heraldpb.LLMRequest{RequestId: "s1:1:1:main", SessionId: "s1", TaskId: "t1", Tenant: "acme", Purpose: "agent",
		Step: 1, Turn: 1, ReplySubject: bus.LLMResponse(bus.OwnerLoop, "s1"),
		Messages: []*heraldpb.ChatMessage{{Role: "user", Content: "hello"}}}
	require.NoError(t, bus.PublishProto(ctx, loop.js, bus.LLMRequest("s1"), req.GetRequestId(), req))

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(posted) == 1
	}, 20*time.Second, 20*time.Millisecond, "violations: %v", s.violations())
	require.Equal(t, "acme", posted[0].Tenant)
	require.Equal(t, 50.0, posted[0].Threshold)
	kv, err := admin.js.KeyValue(ctx, bus.BucketSpend)
	require.NoError(t, err)
	e, err := kv.Get(ctx, "tenant.acme.daily."+time.Now().UTC().Format("2006-01-02"))
	require.NoError(t, err)
	require.Equal(t, "600000000", string(e.Value()), "settled: the real cost, nothing held")
	require.Empty(t, s.violations())
	require.Empty(t, gw.errors())
}
