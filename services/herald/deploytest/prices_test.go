package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/stretchr/testify/require"
)

// Prices are the operator's: the gateway watches the imported prices under
// its own user, and neither it nor a tenant nor a tool runner can write one
// (a forged price would bill every tenant).
func TestGatewayWatchesImportedPricesButNoServiceWritesThem(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prices, err := admin.js.KeyValue(ctx, bus.BucketPrices)
	require.NoError(t, err)
	require.NoError(t, bus.PutImportedPrice(ctx, prices, pricing.Imported{Model: "m", Prices: []pricing.Price{{Input: 1}}}))

	gw := s.connect(t, "gateway")
	kv, err := gw.js.KeyValue(ctx, bus.BucketPrices)
	require.NoError(t, err)
	w, err := kv.WatchAll(ctx)
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	e := <-w.Updates()
	require.NotNil(t, e)
	require.Equal(t, "m", e.Key())
	require.Empty(t, s.violations(), "watching is allowed")

	_, err = kv.Put(shortCtx(t), "m", []byte(`{"model":"m","prices":[{"input":0}]}`))
	require.Error(t, err)
	gw.requireDenied("publish", "$KV.herald_prices.m")
	for _, user := range []string{"tenant_acme", "toolrunner", "loop"} {
		c := s.connect(t, user)
		_ = c.nc.Publish("$KV.herald_prices.m", []byte(`{"model":"m","prices":[{"input":0}]}`))
		c.requireDenied("publish", "$KV.herald_prices.m")
	}
	got, err := prices.Get(ctx, "m")
	require.NoError(t, err)
	require.Contains(t, string(got.Value()), `"input":1`, "the price is intact")
}
