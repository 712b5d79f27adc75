package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Imported is one model's prices read from a public catalogue (`herald
// prices import`): its dated entries, oldest first, and the name prefixes
// the catalogue says are this model too.
type Imported struct {
	Model     string   `json:"model"`
	Catalogue string   `json:"catalogue"`
	Provider  string   `json:"provider,omitempty"`
	Prefixes  []string `json:"prefixes,omitempty"`
	Prices    []Price  `json:"prices"`
}

// Catalogue formats ParseCatalogue reads.
const (
	// CatalogueLiteLLM is LiteLLM's model_prices_and_context_window.json:
	// an object of models, USD per token
	// (https://github.com/BerriAI/litellm/blob/main/model_prices_and_context_window.json).
	CatalogueLiteLLM = "litellm"
	// CatalogueGenAIPrices is pydantic's genai-prices data (data.json, and
	// what the npm package @pydantic/genai-prices bundles): a list of
	// providers and their models, USD per million tokens, with tiers and
	// dated prices (https://github.com/pydantic/genai-prices).
	CatalogueGenAIPrices = "genai-prices"
)

// Catalogue is what a catalogue file held: its models' prices, and what of
// it Herald's price model cannot hold (skipped, with the reason).
type Catalogue struct {
	Format  string
	Models  map[string]Imported
	Skipped []string
}

// ParseCatalogue reads a LiteLLM or genai-prices catalogue, telling them
// apart by shape (an object of models, or a list of providers).
func ParseCatalogue(data []byte) (Catalogue, error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case bytes.HasPrefix(trimmed, []byte("[")):
		return parseGenAIPrices(trimmed)
	case bytes.HasPrefix(trimmed, []byte("{")):
		return parseLiteLLM(trimmed)
	}
	return Catalogue{}, fmt.Errorf("not a price catalogue: want LiteLLM's JSON object of models or genai-prices' JSON list of providers")
}

// usdPerMillion turns a catalogue's price into USD per million tokens,
// rounded to a billionth of a dollar (3e-06 per token is 3, not
// 3.0000000000000004).
func usdPerMillion(v, scale float64) float64 {
	return math.Round(v*scale*1e9) / 1e9
}

// --- LiteLLM ---

var litellmTier = regexp.MustCompile(`^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost)_above_(\d+)k_tokens$`)

func parseLiteLLM(data []byte) (Catalogue, error) {
	var all map[string]any
	if err := json.Unmarshal(data, &all); err != nil {
		return Catalogue{}, fmt.Errorf("LiteLLM catalogue: %w", err)
	}
	raw := map[string]map[string]any{}
	for name, v := range all {
		if m, ok := v.(map[string]any); ok { // not a comment
			raw[name] = m
		}
	}
	cat := Catalogue{Format: CatalogueLiteLLM, Models: map[string]Imported{}}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	ignored := map[string]int{}
	for _, name := range names {
		if name == "sample_spec" {
			continue
		}
		m := raw[name]
		in, hasIn := number(m["input_cost_per_token"])
		out, hasOut := number(m["output_cost_per_token"])
		if !hasIn && !hasOut {
			continue // not priced by the token (images, audio by the second...)
		}
		p := Price{Input: usdPerMillion(in, 1e6), Output: usdPerMillion(out, 1e6)}
		if v, ok := number(m["cache_read_input_token_cost"]); ok {
			p.CacheRead = usdPerMillion(v, 1e6)
		}
		if v, ok := number(m["cache_creation_input_token_cost"]); ok {
			p.CacheWrite = usdPerMillion(v, 1e6)
		}
		tiers := map[int64]*Tier{}
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
			t := tiers[k*1000]
			if t == nil {
				t = &Tier{AboveInputTokens: k * 1000}
				tiers[k*1000] = t
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
		for _, t := range tiers {
			p.Tiers = append(p.Tiers, *t)
		}
		sort.Slice(p.Tiers, func(i, j int) bool { return p.Tiers[i].AboveInputTokens < p.Tiers[j].AboveInputTokens })
		if sc, ok := m["search_context_cost_per_query"].(map[string]any); ok {
			for size, v := range sc {
				if f, ok := number(v); ok && f > 0 {
					if p.Fees == nil {
						p.Fees = map[string]float64{}
					}
					p.Fees[strings.Replace(size, "search_context_size_", "search_context_", 1)] = f
				}
			}
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

// litellmKnown are LiteLLM's price keys Herald reads.
var litellmKnown = map[string]bool{"input_cost_per_token": true, "output_cost_per_token": true,
	"cache_read_input_token_cost": true, "cache_creation_input_token_cost": true, "search_context_cost_per_query": true}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok && f >= 0 && !math.IsInf(f, 0)
}

func ignoredKeys(ignored map[string]int) []string {
	keys := make([]string, 0, len(ignored))
	for k := range ignored {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("price %s (%d models): Herald prices tokens by input, output, cache read and cache write only", k, ignored[k]))
	}
	return out
}

// --- genai-prices ---

type gpProvider struct {
	ID         string          `json:"id"`
	ModelMatch json.RawMessage `json:"model_match"`
	Models     []gpModel       `json:"models"`
}

type gpModel struct {
	ID     string          `json:"id"`
	Match  json.RawMessage `json:"match"`
	Prices json.RawMessage `json:"prices"`
}

type gpConditional struct {
	Constraint *struct {
		Type      string `json:"type"`
		StartDate string `json:"start_date"`
	} `json:"constraint"`
	Prices map[string]json.RawMessage `json:"prices"`
}

type gpTiered struct {
	Base  float64 `json:"base"`
	Tiers []struct {
		Start int64   `json:"start"`
		Price float64 `json:"price"`
	} `json:"tiers"`
}

func parseGenAIPrices(data []byte) (Catalogue, error) {
	var providers []gpProvider
	if err := json.Unmarshal(data, &providers); err != nil {
		return Catalogue{}, fmt.Errorf("genai-prices catalogue: %w", err)
	}
	cat := Catalogue{Format: CatalogueGenAIPrices, Models: map[string]Imported{}}
	ignored := map[string]int{}
	// home: the model is its provider's own (the provider's model_match
	// matches it), which wins over a reseller listing the same name.
	home := map[string]bool{}
	for _, pr := range providers {
		for _, m := range pr.Models {
			if m.ID == "" {
				continue
			}
			imp, skipped, err := genaiModel(pr.ID, m, ignored)
			if err != nil {
				cat.Skipped = append(cat.Skipped, fmt.Sprintf("%s:%s: %v", pr.ID, m.ID, err))
				continue
			}
			cat.Skipped = append(cat.Skipped, skipped...)
			if len(imp.Prices) == 0 {
				continue
			}
			own := matches(pr.ModelMatch, m.ID)
			if _, dup := cat.Models[m.ID]; dup && (home[m.ID] || !own) {
				continue
			}
			cat.Models[m.ID], home[m.ID] = imp, own
		}
	}
	cat.Skipped = append(cat.Skipped, ignoredKeys(ignored)...)
	return cat, nil
}

func genaiModel(provider string, m gpModel, ignored map[string]int) (Imported, []string, error) {
	imp := Imported{Model: m.ID, Catalogue: CatalogueGenAIPrices, Provider: provider}
	var prefixes []string
	matchNames(m.Match, &prefixes)
	for _, p := range prefixes {
		if p != m.ID {
			imp.Prefixes = append(imp.Prefixes, p)
		}
	}
	sort.Strings(imp.Prefixes)
	var conds []gpConditional
	if bytes.HasPrefix(bytes.TrimSpace(m.Prices), []byte("[")) {
		if err := json.Unmarshal(m.Prices, &conds); err != nil {
			return imp, nil, err
		}
	} else {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(m.Prices, &one); err != nil {
			return imp, nil, err
		}
		conds = []gpConditional{{Prices: one}}
	}
	var skipped []string
	for _, c := range conds {
		if !hasTokenPrice(c.Prices) {
			continue // {} (a subscription's models): no price, not a price of 0
		}
		p, err := genaiPrice(c.Prices, ignored)
		if err != nil {
			return imp, nil, err
		}
		if c.Constraint != nil {
			if c.Constraint.Type != "start_date" {
				skipped = append(skipped, fmt.Sprintf("%s:%s: its price by %s is left out (Herald's prices change by date only); its other prices are imported", provider, m.ID, c.Constraint.Type))
				continue
			}
			since, err := ParseSince(c.Constraint.StartDate)
			if err != nil {
				return imp, nil, err
			}
			p.Since = since
		}
		imp.Prices = append(imp.Prices, p)
	}
	sorted, err := sortDated(imp.Prices)
	if err != nil {
		return imp, nil, err
	}
	imp.Prices = sorted
	for _, p := range imp.Prices {
		if err := p.Validate(m.ID); err != nil {
			return imp, nil, err
		}
	}
	return imp, skipped, nil
}

// hasTokenPrice: raw prices input or output tokens.
func hasTokenPrice(raw map[string]json.RawMessage) bool {
	_, in := raw["input_mtok"]
	_, out := raw["output_mtok"]
	return in || out
}

// genaiPrice reads one genai-prices price object (USD per million tokens,
// per thousand requests; a tiered price per key).
func genaiPrice(raw map[string]json.RawMessage, ignored map[string]int) (Price, error) {
	var p Price
	type tiered struct {
		base  *float64
		tiers gpTiered
	}
	keyed := map[string]*tiered{}
	for key, v := range raw {
		var f float64
		var tp gpTiered
		if err := json.Unmarshal(v, &f); err != nil {
			if err := json.Unmarshal(v, &tp); err != nil {
				return p, fmt.Errorf("price %s: neither a number nor tiered prices", key)
			}
			f = tp.Base
			keyed[key] = &tiered{tiers: tp}
		}
		if f < 0 {
			return p, fmt.Errorf("price %s is negative", key)
		}
		switch key {
		case "input_mtok":
			p.Input = f
		case "output_mtok":
			p.Output = f
		case "cache_read_mtok":
			p.CacheRead = f
		case "cache_write_mtok":
			p.CacheWrite = f
		case "requests_kcount":
			p.PerRequest = usdPerMillion(f, 1e-3)
		case "web_searches_kcount":
			if p.Fees == nil {
				p.Fees = map[string]float64{}
			}
			p.Fees[FeeWebSearch] = usdPerMillion(f, 1e-3)
		default:
			ignored[key]++
			delete(keyed, key)
		}
	}
	// genai-prices tiers each key on its own; Herald's tiers set every
	// token price above one threshold, so each threshold any key has
	// becomes a tier holding every tiered key's price there.
	var starts []int64
	seen := map[int64]bool{}
	for _, t := range keyed {
		for _, tier := range t.tiers.Tiers {
			if !seen[tier.Start] {
				seen[tier.Start] = true
				starts = append(starts, tier.Start)
			}
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for _, start := range starts {
		if start <= 0 {
			continue
		}
		tier := Tier{AboveInputTokens: start}
		for key, t := range keyed {
			price, found := t.tiers.Base, false
			for _, tt := range t.tiers.Tiers {
				if tt.Start <= start && tt.Start > 0 {
					price, found = tt.Price, true
				}
			}
			if !found {
				continue
			}
			v := price
			switch key {
			case "input_mtok":
				tier.Input = &v
			case "output_mtok":
				tier.Output = &v
			case "cache_read_mtok":
				tier.CacheRead = &v
			case "cache_write_mtok":
				tier.CacheWrite = &v
			}
		}
		p.Tiers = append(p.Tiers, tier)
	}
	return p, nil
}

// matchNames collects the names a genai-prices match rule names exactly
// or by prefix (equals, starts_with, and those inside or); other rules
// (contains, regex, ends_with, and) match by the model's id alone.
func matchNames(raw json.RawMessage, out *[]string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	for _, key := range []string{"equals", "starts_with"} {
		var s string
		if v, ok := m[key]; ok && json.Unmarshal(v, &s) == nil && s != "" {
			*out = append(*out, s)
		}
	}
	var or []json.RawMessage
	if v, ok := m["or"]; ok && json.Unmarshal(v, &or) == nil {
		for _, r := range or {
			matchNames(r, out)
		}
	}
}

// matches evaluates a genai-prices match rule on name.
func matches(raw json.RawMessage, name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	str := func(key string) (string, bool) {
		var s string
		v, ok := m[key]
		return s, ok && json.Unmarshal(v, &s) == nil
	}
	if s, ok := str("equals"); ok {
		return name == s
	}
	if s, ok := str("starts_with"); ok {
		return strings.HasPrefix(name, s)
	}
	if s, ok := str("ends_with"); ok {
		return strings.HasSuffix(name, s)
	}
	if s, ok := str("contains"); ok {
		return strings.Contains(name, s)
	}
	if s, ok := str("regex"); ok {
		re, err := regexp.Compile(s)
		return err == nil && re.MatchString(name)
	}
	var rules []json.RawMessage
	if v, ok := m["or"]; ok && json.Unmarshal(v, &rules) == nil {
		for _, r := range rules {
			if matches(r, name) {
				return true
			}
		}
		return false
	}
	if v, ok := m["and"]; ok && json.Unmarshal(v, &rules) == nil {
		for _, r := range rules {
			if !matches(r, name) {
				return false
			}
		}
		return len(rules) > 0
	}
	return false
}
