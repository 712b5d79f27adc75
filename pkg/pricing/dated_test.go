package pricing

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func day(s string) time.Time {
	t, err := ParseSince(s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestDatedEntriesPriceEachRowByItsTime(t *testing.T) {
	var prices map[string]Price
	require.NoError(t, yaml.Unmarshal([]byte(`
plain: {input: 1, output: 2}
changed:
  - {since: 2026-11-15, input: 1.5, output: 3}
  - {input: 1, output: 2}
  - {since: "2026-11-20T12:00:00Z", input: 2, output: 4}
`), &prices))
	require.Equal(t, 2.0, prices["changed"].Input, "the Price of a list is its latest entry")
	require.Len(t, prices["changed"].Dated, 3)
	table := NewTable(prices)
	u := &heraldpb.Usage{InputTokens: 1000, OutputTokens: 100}

	nano, src := table.CostAt("changed", day("2026-11-14T23:59:59Z"), u, Charges{})
	require.Equal(t, uint64(1000*(1000*1+100*2)), nano)
	require.Equal(t, "config", src, "the first entry has no since")
	nano, src = table.CostAt("changed", day("2026-11-15"), u, Charges{})
	require.Equal(t, uint64(1000*(1000*1.5+100*3)), nano)
	require.Equal(t, "config;since=2026-11-15", src)
	nano, src = table.CostAt("changed", day("2026-11-20T12:00:00Z"), u, Charges{Served: true})
	require.Equal(t, uint64(1000*(1000*2+100*4)), nano)
	require.Equal(t, "config;since=2026-11-20T12:00:00Z", src)

	_, src = table.CostAt("plain", day("2020-01-01"), u, Charges{})
	require.Equal(t, "config", src, "a single entry without since: reads as before")
}

func TestPriceBeforeItsFirstEntryFallsThrough(t *testing.T) {
	table := NewTable(map[string]Price{"gpt-4o": {Since: day("2026-11-01"), Input: 9}})
	_, src := table.CostAt("gpt-4o", day("2026-10-31"), &heraldpb.Usage{InputTokens: 1}, Charges{})
	require.Equal(t, "builtin", src)
	_, src = table.CostAt("my-model", day("2026-10-31"), &heraldpb.Usage{InputTokens: 1}, Charges{})
	require.Equal(t, "unknown", src)
}

func TestDatedConfigRefusesAmbiguity(t *testing.T) {
	for doc, want := range map[string]string{
		"m: [{input: 1}, {input: 2}]":                                       "two prices without since",
		"m: [{since: 2026-01-01, input: 1}, {since: 2026-01-01, input: 2}]": "two prices since 2026-01-01",
		"m: {since: yesterday, input: 1}":                                   `"yesterday" is neither a date`,
		"m: [[1]]":                                                          "a dated price is a mapping",
		"m: []":                                                             "an empty list",
	} {
		var prices map[string]Price
		err := yaml.Unmarshal([]byte(doc), &prices)
		require.ErrorContains(t, err, want, doc)
	}
}

func TestSinceSurvivesTheSourceString(t *testing.T) {
	a := Applied{Source: SourceImported, Since: day("2026-11-15T09:30:00+01:00"), Tier: 200000, Fees: map[string]int64{"web_search": 2}}
	s := a.String()
	require.Equal(t, "imported;since=2026-11-15T08:30:00Z;tier=200000;web_search=2", s)
	back, err := ParseSource(s)
	require.NoError(t, err)
	require.Equal(t, a, back)
	_, err = ParseSource("config;since=soon")
	require.Error(t, err)
}

func TestRepriceAtPricesAnUnpricedRowOnceAPriceExists(t *testing.T) {
	u := &heraldpb.Usage{InputTokens: 500, OutputTokens: 50}
	before := NewTable(nil)
	nano, src := before.CostAt("my-model", day("2026-11-03"), u, Charges{Served: true, Fees: map[string]int64{"web_search": 1}})
	require.Zero(t, nano)
	require.Equal(t, "unknown;web_search=1", src)

	after := NewTable(map[string]Price{"my-model": {Since: day("2026-11-01"), Input: 2, Output: 4, PerRequest: 0.001,
		Fees: map[string]float64{"web_search": 0.01}}})
	again, newSrc, err := after.RepriceAt("my-model", day("2026-11-03"), u, src)
	require.NoError(t, err)
	require.Equal(t, uint64(1000*(500*2+50*4)+1_000_000+10_000_000), again)
	require.Equal(t, "config;since=2026-11-01;requests=1;web_search=1", newSrc)
	// priced again from its new source: the same figure (idempotent)
	third, thirdSrc, err := after.RepriceAt("my-model", day("2026-11-03"), u, newSrc)
	require.NoError(t, err)
	require.Equal(t, again, third)
	require.Equal(t, newSrc, thirdSrc)
}

func TestImportedPricesSitBetweenConfigAndBuiltin(t *testing.T) {
	imp := map[string]Imported{
		"claude-haiku-4-5": {Model: "claude-haiku-4-5", Prices: []Price{{Input: 7}}},
		"acme-1":           {Model: "acme-1", Prefixes: []string{"acme-1-"}, Prices: []Price{{Input: 1}, {Since: day("2026-11-15"), Input: 2}}},
	}
	table := NewTable(map[string]Price{"acme-1": {Since: day("2026-12-01"), Input: 5}}).WithImported(imp)
	u := &heraldpb.Usage{InputTokens: 1000}
	at := day("2026-11-20")
	nano, src := table.CostAt("claude-haiku-4-5", at, u, Charges{})
	require.Equal(t, uint64(7_000_000), nano, "imported beats built-in")
	require.Equal(t, "imported", src)
	nano, src = table.CostAt("acme-1-20261101", at, u, Charges{})
	require.Equal(t, uint64(2_000_000), nano, "by the catalogue's prefix, the entry in force")
	require.Equal(t, "imported;since=2026-11-15", src)
	nano, src = table.CostAt("vendor/acme-1", day("2026-12-02"), u, Charges{})
	require.Equal(t, uint64(5_000_000), nano, "configured beats imported")
	require.Equal(t, "config;since=2026-12-01", src)
}

func TestLiteLLMCatalogue(t *testing.T) {
	data, err := os.ReadFile("testdata/litellm_prices.json")
	require.NoError(t, err)
	cat, err := ParseCatalogue(data)
	require.NoError(t, err)
	require.Equal(t, CatalogueLiteLLM, cat.Format)
	require.Len(t, cat.Models, 3, "the image model is not priced by the token")
	chat := cat.Models["acme-chat-1"].Prices[0]
	require.Equal(t, 3.0, chat.Input)
	require.Equal(t, 15.0, chat.Output)
	require.Equal(t, 0.3, chat.CacheRead)
	require.Equal(t, 3.75, chat.CacheWrite)
	require.Len(t, chat.Tiers, 1)
	require.Equal(t, int64(200_000), chat.Tiers[0].AboveInputTokens)
	require.Equal(t, 6.0, *chat.Tiers[0].Input)
	require.Nil(t, chat.Tiers[0].CacheWrite, "a tier price the catalogue leaves out is the base price")
	require.Equal(t, 0.012, cat.Models["acme/acme-search-1"].Prices[0].Fees["search_context_high"])
	require.Contains(t, cat.Skipped[len(cat.Skipped)-1], "input_cost_per_audio_token (1 models)")
	require.Contains(t, cat.Skipped, "pricing.acme-negative-1: prices must not be negative", "a negative price is refused, not read as 0")

	// priced the way the catalogue means: above 200k, the tier's rates
	nano, _ := NewTable(nil).WithImported(cat.Models).CostAt("acme-chat-1", time.Now(), &heraldpb.Usage{InputTokens: 250_000, OutputTokens: 10}, Charges{})
	require.Equal(t, uint64(1000*(250_000*6+10*22.5)), nano)
}

// genaiSample is written for this test in the shape of genai-prices'
// data.json (https://github.com/pydantic/genai-prices, prices/data.json:
// providers, models with match rules, prices per million tokens, tiered
// and dated prices); the figures are made up.
const genaiSample = `[
 {"id": "acme", "name": "Acme", "api_pattern": "x", "model_match": {"starts_with": "acme"},
  "models": [
   {"id": "acme-pro", "match": {"or": [{"equals": "acme-pro"}, {"starts_with": "acme-pro-2026"}]},
    "prices": [
      {"prices": {"input_mtok": {"base": 1.25, "tiers": [{"start": 200000, "price": 2.5}]}, "output_mtok": {"base": 10, "tiers": [{"start": 200000, "price": 15}]}, "cache_read_mtok": 0.125}},
      {"constraint": {"type": "start_date", "start_date": "2026-11-15"}, "prices": {"input_mtok": 2, "output_mtok": 12, "web_searches_kcount": 10, "input_audio_mtok": 40}},
      {"constraint": {"type": "time_of_date", "start_time": "16:30:00Z", "end_time": "00:30:00Z"}, "prices": {"input_mtok": 1, "output_mtok": 6}}
    ]},
   {"id": "acme-mini", "match": {"contains": "acme-mini"}, "prices": {"input_mtok": 0.1, "output_mtok": 0.4, "requests_kcount": 5}}
  ]},
 {"id": "reseller", "name": "Reseller", "api_pattern": "y", "models": [
   {"id": "acme-mini", "match": {"equals": "acme-mini"}, "prices": {"input_mtok": 9, "output_mtok": 9}},
   {"id": "acme-max", "match": {"equals": "acme-max"}, "prices": {}}
 ]}
]`

func TestGenAIPricesCatalogue(t *testing.T) {
	cat, err := ParseCatalogue([]byte(genaiSample))
	require.NoError(t, err)
	require.Equal(t, CatalogueGenAIPrices, cat.Format)
	pro := cat.Models["acme-pro"]
	require.Equal(t, []string{"acme-pro-2026"}, pro.Prefixes)
	require.Len(t, pro.Prices, 2, "the time-of-day price is skipped")
	require.Equal(t, int64(200_000), pro.Prices[0].Tiers[0].AboveInputTokens)
	require.Equal(t, 15.0, *pro.Prices[0].Tiers[0].Output)
	require.Equal(t, day("2026-11-15"), pro.Prices[1].Since)
	require.Equal(t, 0.01, pro.Prices[1].Fees[FeeWebSearch])
	require.Equal(t, 0.005, cat.Models["acme-mini"].Prices[0].PerRequest)
	require.Equal(t, 0.1, cat.Models["acme-mini"].Prices[0].Input, "the maker's listing wins over a reseller's")
	require.NotContains(t, cat.Models, "acme-max", "no price is not a price of 0")
	joined, _ := json.Marshal(cat.Skipped)
	require.Contains(t, string(joined), "time_of_date")
	require.Contains(t, string(joined), "input_audio_mtok")

	table := NewTable(nil).WithImported(cat.Models)
	_, src := table.CostAt("acme-pro-20261101", day("2026-11-16"), &heraldpb.Usage{InputTokens: 1}, Charges{})
	require.Equal(t, "imported;since=2026-11-15", src)
}

func TestPlanImportKeepsTheOperatorsEntries(t *testing.T) {
	cat, err := ParseCatalogue([]byte(genaiSample))
	require.NoError(t, err)
	now := day("2026-11-20")
	config := map[string]Price{"acme-mini": {Input: 0.2, Output: 0.8}}
	plan := PlanImport(cat, nil, config, now)
	require.Equal(t, []string{"acme-mini", "acme-pro"}, plan.Added)
	require.Len(t, plan.Kept, 1)
	require.Equal(t, "acme-mini", plan.Kept[0].Model)
	require.Equal(t, 0.2, plan.Kept[0].Configured.Input)

	old := map[string]Imported{}
	for _, imp := range plan.Put {
		old[imp.Model] = imp
	}
	again := PlanImport(cat, old, config, now)
	require.Empty(t, again.Added)
	require.Empty(t, again.Changed)
	require.Equal(t, 2, again.Unchanged)
	require.Empty(t, again.Put, "an import of the same catalogue changes nothing")

	// herald.yaml's "acme-mini" prices the catalogue's "reseller/acme-mini" too
	vendor := Catalogue{Format: cat.Format, Models: map[string]Imported{"reseller/acme-mini": {Model: "reseller/acme-mini", Prices: []Price{{Input: 9}}}}}
	require.Equal(t, "reseller/acme-mini", PlanImport(vendor, nil, config, now).Kept[0].Model)

	changed := old["acme-pro"]
	changed.Prices = []Price{{Input: 1}}
	old["acme-pro"] = changed
	require.Equal(t, []string{"acme-pro"}, PlanImport(cat, old, config, now).Changed)
}
