package gateway

import (
	"context"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

func TestSessionMoneyBudgetStopsCallsBeforeTheModel(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("unused")))
	req := r.request("b1", "hello")
	req.MaxCostUsd, req.SpentUsd = 0.50, 0.50
	resp := r.call(req)

	require.Equal(t, string(ClassBudgetExceeded), resp.GetErrorClass())
	require.Contains(t, resp.GetError(), "max_cost_usd $0.5000")
	require.Zero(t, r.model.Calls())
	require.Empty(t, r.usageEvents(), "nothing was attempted, nothing is billed")

	under := r.request("b1", "hello")
	under.MaxCostUsd, under.SpentUsd = 0.50, 0.49
	require.Empty(t, r.call(under).GetError())
}

func TestTenantMoneyBudgetIsSharedAndEnforced(t *testing.T) {
	usage := &scripted.Usage{PromptTokens: 1_000_000, CompletionTokens: 0}
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "pricey", Usage: usage}), func(c *Config) {
		c.Pricing = map[string]config.Price{"m1": {Input: 2}}
		c.Budgets.Tenants = map[string]config.BudgetLimits{"acme": {Total: 3}}
	})
	ask := func(sid string) (string, string) {
		req := r.request(sid, "hello")
		req.Tenant = "acme"
		resp := r.call(req)
		return resp.GetErrorClass(), resp.GetError()
	}
	class, _ := ask("b2")
	require.Empty(t, class)
	class, _ = ask("b3")
	require.Empty(t, class, "$2 spent of $3: still allowed")
	class, msg := ask("b4")
	require.Equal(t, string(ClassBudgetExceeded), class)
	require.Contains(t, msg, `tenant "acme"`)
	require.Contains(t, msg, "$4.0000 spent of $3.0000")
	require.Equal(t, 2, r.model.Calls())

	kv, err := r.bus.JS.KeyValue(context.Background(), bus.BucketSpend)
	require.NoError(t, err)
	e, err := kv.Get(context.Background(), "acme")
	require.NoError(t, err)
	require.Equal(t, "4000000000", string(e.Value()), "nano-USD spent by the tenant")

	other := r.request("b5", "hello")
	other.Tenant = "globex"
	require.Empty(t, r.call(other).GetError(), "other tenants are not affected")
}
