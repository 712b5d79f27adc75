package pricing

import (
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func f64(v float64) *float64 { return &v }

// longContext is priced like Gemini 2.5 Pro: base rates up to 200k prompt
// tokens, higher ones above, with the cache-write price left to the base.
var longContext = Price{Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 2,
	Tiers: []Tier{{AboveInputTokens: 200_000, Input: f64(2.50), Output: f64(15), CacheRead: f64(0.25)}}}

func TestTierAppliesAboveItsThresholdOnly(t *testing.T) {
	at := &heraldpb.Usage{InputTokens: 150_000, CacheReadTokens: 40_000, CacheWriteTokens: 10_000, OutputTokens: 1000}
	nano, a := longContext.Cost(at, Charges{})
	// exactly 200k prompt tokens: base prices
	require.Equal(t, uint64(1000*(150_000*1.25+40_000*0.125+10_000*2+1000*10)), nano)
	require.Zero(t, a.Tier)

	above := &heraldpb.Usage{InputTokens: 150_001, CacheReadTokens: 40_000, CacheWriteTokens: 10_000, OutputTokens: 1000}
	nano, a = longContext.Cost(above, Charges{})
	// one more token: every token at the tier's prices, cache write at the base
	require.Equal(t, uint64(1000*(150_001*2.5+40_000*0.25+10_000*2+1000*15)), nano)
	require.Equal(t, int64(200_000), a.Tier)
}

func TestHighestTierBelowThePromptWins(t *testing.T) {
	p := Price{Input: 1, Tiers: []Tier{{AboveInputTokens: 500_000, Input: f64(3)}, {AboveInputTokens: 100_000, Input: f64(2)}}}
	nano, a := p.Cost(&heraldpb.Usage{InputTokens: 600_000}, Charges{})
	require.Equal(t, uint64(1000*600_000*3), nano)
	require.Equal(t, int64(500_000), a.Tier)
	nano, a = p.Cost(&heraldpb.Usage{InputTokens: 200_000}, Charges{})
	require.Equal(t, uint64(1000*200_000*2), nano)
	require.Equal(t, int64(100_000), a.Tier)
}

func TestFeesAndPerRequestPricedOnceToTheNano(t *testing.T) {
	p := Price{Input: 1, Output: 1, PerRequest: 0.005, Fees: map[string]float64{"web_search": 0.01}}
	u := &heraldpb.Usage{InputTokens: 52, OutputTokens: 120}
	nano, a := p.Cost(u, Charges{Served: true, Fees: map[string]int64{"web_search": 3, "image": 2}})
	require.Equal(t, uint64(172_000+5_000_000+30_000_000), nano)
	require.Equal(t, "config;requests=1;image=2;web_search=3", Applied{Source: SourceConfig, Tier: a.Tier, Requests: a.Requests, Fees: a.Fees}.String(),
		"units without a price are recorded too, so a price added later reprices them")

	notServed, a := p.Cost(u, Charges{})
	require.Equal(t, uint64(172_000), notServed, "a request the provider did not serve pays no request fee")
	require.Zero(t, a.Requests)
}

func TestRowRepricesFromItsSourceAndTheTable(t *testing.T) {
	table := NewTable(map[string]Price{"m": {Input: 2, Output: 4, PerRequest: 0.001, Fees: map[string]float64{"web_search": 0.01},
		Tiers: []Tier{{AboveInputTokens: 1000, Input: f64(3)}}}})
	u := &heraldpb.Usage{InputTokens: 1500, OutputTokens: 10}
	nano, source := table.Cost("m", u, Charges{Served: true, Fees: map[string]int64{"web_search": 2}})
	require.Equal(t, "config;tier=1000;requests=1;web_search=2", source)
	p, _ := table.Lookup("m")
	again, err := Reprice(p, u, source)
	require.NoError(t, err)
	require.Equal(t, nano, again)

	// a fee priced only later: the recorded units are charged then
	later := p
	later.Fees = map[string]float64{"web_search": 0.02}
	repriced, err := Reprice(later, u, source)
	require.NoError(t, err)
	require.Equal(t, nano+2*10_000_000, repriced)
}

func TestUnknownModelCostsNothingButKeepsItsFees(t *testing.T) {
	nano, source := NewTable(nil).Cost("my-local-model", &heraldpb.Usage{InputTokens: 100}, Charges{Served: true,
		Fees: map[string]int64{"web_search": 1}})
	require.Zero(t, nano)
	require.Equal(t, "unknown;web_search=1", source)
}

func TestParseSourceRefusesForgedParts(t *testing.T) {
	for _, s := range []string{"config;tier", "config;tier=-1", "config;Web Search=1", "config;x=1;=2", "config;requests=one"} {
		_, err := ParseSource(s)
		require.Error(t, err, s)
	}
	a, err := ParseSource("builtin")
	require.NoError(t, err)
	require.Equal(t, Applied{Source: SourceBuiltin}, a)
}

func TestValidateNamesTheKey(t *testing.T) {
	bad := Price{Input: 1, Fees: map[string]float64{"Web-Search": 1, "ok": -1}, Tiers: []Tier{{AboveInputTokens: 0, Input: f64(-1)}}}
	err := bad.Validate("gpt-x")
	require.Error(t, err)
	for _, want := range []string{"pricing.gpt-x", `fee name "Web-Search"`, "fees.ok must not be negative", "tiers[0].above_input_tokens", "tiers[0]: prices"} {
		require.Contains(t, err.Error(), want)
	}
	require.NoError(t, longContext.Validate("gemini-2.5-pro"))
}

func TestBuiltinLongContextTiers(t *testing.T) {
	table := NewTable(nil)
	_, source := table.Cost("google/gemini-2.5-pro", &heraldpb.Usage{InputTokens: 250_000}, Charges{Served: true})
	require.Equal(t, "builtin;tier=200000", source)
	_, source = table.Cost("claude-sonnet-4-5-20250929", &heraldpb.Usage{InputTokens: 100_000, CacheReadTokens: 150_000}, Charges{Served: true})
	require.Equal(t, "builtin;tier=200000", source)
	nano, source := table.Cost("claude-haiku-4-5", &heraldpb.Usage{}, Charges{Served: true, Fees: map[string]int64{FeeWebSearch: 1}})
	require.Equal(t, uint64(10_000_000), nano, "$10 per 1,000 searches")
	require.Equal(t, "builtin;web_search=1", source)
}
