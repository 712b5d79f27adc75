package pricing

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// LiteLLM's model_prices_and_context_window.json: an object of models by
// name, USD per token; the fields read are the ones its sample_spec
// documents.

var litellmTier = regexp.MustCompile(`^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost)_above_(\d+)k_tokens$`)

// litellmKnown are LiteLLM's price keys Herald reads.
var litellmKnown = map[string]bool{"input_cost_per_token": true, "output_cost_per_token": true,
	"cache_read_input_token_cost": true, "cache_creation_input_token_cost": true, "search_context_cost_per_query": true}

func parseLiteLLM(data []byte) (Catalogue, error) {
	var all map[string]any
	if err := json.Unmarshal(data, &all); err != nil {
		return Catalogue{}, fmt.Errorf("LiteLLM catalogue: %w", err)
	}
	names := make([]string, 0, len(all))
	for name, v := range all {
		if _, ok := v.(map[string]any); ok && name != "sample_spec" { // not a comment nor the spec
			names = append(names, name)
		}
	}
	sort.Strings(names)
	cat := Catalogue{Format: CatalogueLiteLLM, Models: map[string]Imported{}}
	ignored := map[string]int{}
	for _, name := range names {
		m := all[name].(map[string]any)
		p, ok := litellmPrice(m, ignored)
		if !ok {
			continue // not priced by the token (images, audio by the second...)
		}
		if err := p.Validate(name); err != nil {
			cat.Skipped = append(cat.Skipped, err.Error())
			continue
		}
		provider, _ := m["litellm_provider"].(string)
		cat.Models[name] = Imported{Model: name, Catalogue: CatalogueLiteLLM, Provider: provider, Prices: []Price{p}}
	}
	cat.Skipped = append(cat.Skipped, ignoredKeys(ignored)...)
	return cat, nil
}

// litellmPrice reads one model's token prices, tiers and search fees; ok
// false when it has no token price at all. A negative price is kept, for
// Validate to refuse.
func litellmPrice(m map[string]any, ignored map[string]int) (Price, bool) {
	in, hasIn := number(m["input_cost_per_token"])
	out, hasOut := number(m["output_cost_per_token"])
	if !hasIn && !hasOut {
		return Price{}, false
	}
	p := Price{Input: usdPerMillion(in, 1e6), Output: usdPerMillion(out, 1e6)}
	if v, ok := number(m["cache_read_input_token_cost"]); ok {
		p.CacheRead = usdPerMillion(v, 1e6)
	}
	if v, ok := number(m["cache_creation_input_token_cost"]); ok {
		p.CacheWrite = usdPerMillion(v, 1e6)
	}
	p.Tiers = litellmTiers(m, ignored)
	if sc, ok := m["search_context_cost_per_query"].(map[string]any); ok {
		for size, v := range sc {
			if f, ok := number(v); ok && f != 0 {
				if p.Fees == nil {
					p.Fees = map[string]float64{}
				}
				p.Fees[strings.Replace(size, "search_context_size_", "search_context_", 1)] = f
			}
		}
	}
	return p, true
}

// litellmTiers reads the …_above_<N>k_tokens prices, one Herald tier per
// threshold, and counts the price keys Herald does not read.
func litellmTiers(m map[string]any, ignored map[string]int) []Tier {
	byStart := map[int64]*Tier{}
	for key, v := range m {
		sub := litellmTier.FindStringSubmatch(key)
		if sub == nil {
			if strings.Contains(key, "cost") && !litellmKnown[key] {
				ignored[key]++
			}
			continue
		}
		f, ok := number(v)
		if !ok {
			continue
		}
		k, _ := strconv.ParseInt(sub[2], 10, 64)
		t := byStart[k*1000]
		if t == nil {
			t = &Tier{AboveInputTokens: k * 1000}
			byStart[k*1000] = t
		}
		price := usdPerMillion(f, 1e6)
		switch sub[1] {
		case "input_cost_per_token":
			t.Input = &price
		case "output_cost_per_token":
			t.Output = &price
		case "cache_read_input_token_cost":
			t.CacheRead = &price
		case "cache_creation_input_token_cost":
			t.CacheWrite = &price
		}
	}
	var tiers []Tier
	for _, t := range byStart {
		tiers = append(tiers, *t)
	}
	sort.Slice(tiers, func(i, j int) bool { return tiers[i].AboveInputTokens < tiers[j].AboveInputTokens })
	return tiers
}
