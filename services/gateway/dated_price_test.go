package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// A call is billed by the entry in force when it is made, and its usage
// row names that entry; an entry dated in the future does not price it.
func TestCallIsBilledByTheEntryInForceAndNamesIt(t *testing.T) {
	past := time.Now().UTC().Add(-48 * time.Hour).Truncate(24 * time.Hour)
	future := time.Now().UTC().Add(48 * time.Hour)
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "ok", Usage: &scripted.Usage{PromptTokens: 1000, CompletionTokens: 100}}),
		func(c *Config) {
			c.Pricing = map[string]config.Price{"m1": {Dated: []config.Price{
				{Input: 1, Output: 1}, {Since: past, Input: 2, Output: 4}, {Since: future, Input: 100, Output: 100}}}}
		})
	r.call(r.request("s1", "hi"))
	usage := r.usageEvents()
	require.Len(t, usage, 1)
	require.Equal(t, uint64(1000*(1000*2+100*4)), usage[0].GetCostNanoUsd())
	require.Equal(t, "config;since="+pricing.FormatSince(past), usage[0].GetPriceSource())
}

// A price put on the herald_prices bucket is in force for the running
// gateway's next call; a value that does not decode is left out (the
// model stays priced as before) rather than pricing anything.
func TestImportedPriceIsInForceForTheNextCall(t *testing.T) {
	r := newRig(t, scripted.Conversation(
		scripted.Reply{Content: "one", Usage: &scripted.Usage{PromptTokens: 1000, CompletionTokens: 100}},
		scripted.Reply{Content: "two", Usage: &scripted.Usage{PromptTokens: 1000, CompletionTokens: 100}},
		scripted.Reply{Content: "three", Usage: &scripted.Usage{PromptTokens: 1000, CompletionTokens: 100}}),
		func(c *Config) { c.Pricing = nil })
	r.call(r.request("s1", "before"))
	require.Equal(t, PriceUnknown, r.usageEvents()[0].GetPriceSource())

	ctx := context.Background()
	kv, err := r.bus.JS.KeyValue(ctx, bus.BucketPrices)
	require.NoError(t, err)
	// a forged value under another model's key prices nothing (the watch sees it before the next put)
	forged, _ := json.Marshal(pricing.Imported{Model: "m1", Prices: []pricing.Price{{Input: 1000}}})
	_, err = kv.Put(ctx, bus.PriceKey("m2"), forged)
	require.NoError(t, err)
	require.NoError(t, bus.PutImportedPrice(ctx, kv, pricing.Imported{Model: "m1", Catalogue: "litellm",
		Prices: []pricing.Price{{Input: 3, Output: 5}}}))
	require.Eventually(t, func() bool {
		_, src := r.svc.pricer.Lookup("m1")
		return src == PriceImported
	}, 10*time.Second, 5*time.Millisecond)
	r.call(r.request("s1", "after"))
	usage := r.usageEvents()
	require.Len(t, usage, 2)
	require.Equal(t, uint64(1000*(1000*3+100*5)), usage[1].GetCostNanoUsd())
	require.Equal(t, PriceImported, usage[1].GetPriceSource())

	_, err = kv.Put(ctx, bus.PriceKey("m1"), []byte(`{"model":"m1","prices":[{"input":-1}]}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, src := r.svc.pricer.Lookup("m1")
		return src == PriceUnknown
	}, 10*time.Second, 5*time.Millisecond, "a price that fails its checks is not used")
}
