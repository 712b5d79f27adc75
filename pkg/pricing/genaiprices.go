package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// pydantic's genai-prices data (data.json, bundled by the npm package
// @pydantic/genai-prices): a list of providers, each with its models, their
// match rules and prices (USD per million tokens, per thousand requests),
// tiered per key and dated by constraints.

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

// gpTieredKey is one price key's tiered prices.
type gpTieredKey struct{ tiers gpTiered }

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
	keyed := map[string]*gpTieredKey{}
	for key, v := range raw {
		var f float64
		var tp gpTiered
		if err := json.Unmarshal(v, &f); err != nil {
			if err := json.Unmarshal(v, &tp); err != nil {
				return p, fmt.Errorf("price %s: neither a number nor tiered prices", key)
			}
			f = tp.Base
			keyed[key] = &gpTieredKey{tiers: tp}
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
	p.Tiers = genaiTiers(keyed)
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

// genaiTiers turns genai-prices' tiers, which tier each key on its own, into
// Herald's, which set every token price above one threshold: each threshold
// any key has becomes a tier holding every tiered key's price there.
func genaiTiers(keyed map[string]*gpTieredKey) []Tier {
	var tiers []Tier
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
		tiers = append(tiers, tier)
	}
	return tiers
}
