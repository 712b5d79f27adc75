package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestConfigFromTheGlobalConfig(t *testing.T) {
	g := config.Default()
	g.Primary = config.Provider{Provider: "anthropic", Model: "claude-sonnet-4-5", APIKey: "k"}
	g.FallbackProviders = []config.Provider{{Provider: "openai", Model: "gpt-4o-mini"}}
	g.Agent.APIMaxRetries = 5
	g.Pricing = map[string]config.Price{"claude-sonnet-4-5": {Input: 1}}
	g.Tenant = "acme"
	c := ConfigFrom(g)
	require.NoError(t, c.Validate())
	require.Equal(t, 5, c.MaxAttempts)
	require.Equal(t, "acme", c.Tenant)
	require.Len(t, c.Fallbacks, 1)
	require.Equal(t, DefaultRateLimitCooldown, c.RateLimitCooldown)
	require.Equal(t, DefaultConcurrency, c.Concurrency)
	require.Equal(t, 5*time.Second, c.Retry.RateBaseDelay)
	require.Equal(t, 120*time.Second, c.Retry.RateMaxDelay)

	g.Agent.APIMaxRetries = 0
	require.Equal(t, 1, ConfigFrom(g).MaxAttempts, "zero retries still makes one attempt")
}

func TestInvalidConfigIsRefusedAtStart(t *testing.T) {
	b := heraldtest.StartBus(t)
	deps := service.Deps{NC: b.NC, JS: b.JS, Log: heraldtest.Logger(t)}
	_, err := New(Config{}, deps)
	require.ErrorContains(t, err, "primary model is not set")
	_, err = New(Config{Primary: config.Provider{Model: "m"}, Fallbacks: []config.Provider{{Provider: "x"}}}, deps)
	require.ErrorContains(t, err, "fallback_providers[0].model is required")
	_, err = New(Config{Primary: config.Provider{Model: "m"}, Budgets: config.Budgets{Tenants: map[string]config.BudgetLimits{"t": {Total: -1}}}}, deps)
	require.ErrorContains(t, err, "must not be negative")
	_, err = New(Config{Primary: config.Provider{Model: "m"}}, service.Deps{})
	require.ErrorContains(t, err, "NATS")
}

func TestShutdownIsSafeWithoutStartAndTwice(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("x")))
	ctx := context.Background()
	require.NoError(t, r.svc.Shutdown(ctx))
	require.NoError(t, r.svc.Shutdown(ctx))
	require.Error(t, r.svc.Start(ctx), "a shut-down gateway does not start again")
	require.Equal(t, "gateway", r.svc.Name())
}

func TestShutdownDrainsTheCallInFlight(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Reply{Content: "finished", Delay: 300 * time.Millisecond}))
	r.start()
	req := r.request("d1", "slow")
	r.publish(req)
	require.Eventually(t, func() bool { return r.model.Calls() == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.svc.Shutdown(ctx))
	require.Equal(t, "finished", r.awaitResponse(req, time.Second).GetMessage().GetContent())

	later := r.request("d2", "after shutdown")
	r.publish(later)
	require.Never(t, func() bool { return r.model.Calls() > 1 }, 200*time.Millisecond, 10*time.Millisecond)
}

func TestCompressionAndSubagentCallsAreBilledWithTheirPurpose(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("summary")))
	req := r.request("child", "summarise")
	req.Purpose = "compression"
	req.ParentSessionId = "parent"
	req.Tenant = "acme"
	req.ReplySubject = bus.LLMResponse(bus.OwnerCompressor, "child")
	resp := r.call(req)
	require.Equal(t, "summary", resp.GetMessage().GetContent())

	u := r.usageEvents()
	require.Len(t, u, 1)
	require.Equal(t, "compression", u[0].GetPurpose())
	require.Equal(t, "parent", u[0].GetParentSessionId())
	require.Equal(t, "acme", u[0].GetTenant())
}

func TestRequestModelOverridesThePrimaryModel(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("ok")), func(c *Config) {
		c.Pricing = map[string]config.Price{"gpt-4o-mini": {Input: 1}}
	})
	req := r.request("o1", "hello")
	req.Model = "gpt-4o-mini"
	resp := r.call(req)
	require.Equal(t, "gpt-4o-mini", resp.GetModel())
	require.Equal(t, "gpt-4o-mini", r.model.Requests()[0].Model)
	require.Equal(t, PriceConfig, r.usageEvents()[0].GetPriceSource())
}

func TestBuiltinPricesCoverTheMainProviders(t *testing.T) {
	p := NewPricer(map[string]config.Price{"my-model": {Input: 9}})
	for model, src := range map[string]string{
		"gpt-4o-mini": PriceBuiltin, "gpt-5": PriceBuiltin, "o4-mini": PriceBuiltin,
		"claude-sonnet-4-5-20250929": PriceBuiltin, "anthropic/claude-opus-4-1": PriceBuiltin,
		"gemini-2.5-flash": PriceBuiltin, "google/gemini-2.5-pro": PriceBuiltin,
		"deepseek-chat": PriceBuiltin, "deepseek/deepseek-reasoner": PriceBuiltin,
		"my-model": PriceConfig, "llama3.1:8b": PriceUnknown, "scripted": PriceUnknown,
	} {
		_, got := p.Lookup(model)
		require.Equal(t, src, got, model)
	}
	mini, _ := p.Lookup("gpt-4o-mini")
	require.Equal(t, 0.15, mini.Input, "the longest prefix wins over gpt-4o")
}

func TestTwoGatewaysShareTheWorkAndAnswerEachRequestOnce(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "ok", Delay: 20 * time.Millisecond}),
		func(c *Config) { c.Concurrency = 2 })
	nc, js := r.bus.Connect(t, "gateway-2")
	second, err := New(r.cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t)})
	require.NoError(t, err)
	require.NoError(t, second.Start(context.Background()))
	t.Cleanup(func() { _ = second.Shutdown(context.Background()) })

	var reqs []*heraldpb.LLMRequest
	for i := range 20 {
		req := r.request(fmt.Sprintf("w%d", i), "hello")
		reqs = append(reqs, req)
		r.publish(req)
	}
	for _, req := range reqs {
		require.Equal(t, "ok", r.awaitResponse(req, 10*time.Second).GetMessage().GetContent())
	}
	require.Equal(t, 20, r.model.Calls(), "no request was served twice")
	require.Positive(t, r.svc.Stats().Calls)
	require.Positive(t, second.Stats().Calls, "both gateways took work")
	require.Equal(t, int64(20), r.svc.Stats().Calls+second.Stats().Calls)
}
