package pricing

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// Price is one model's price: USD per million tokens by class, USD per
// request, USD per unit of each named fee, and prompt-size tiers.
type Price struct {
	Input      float64 `yaml:"input" json:"input"`
	Output     float64 `yaml:"output" json:"output"`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read"`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write"`
	// PerRequest is charged once for every request the provider answered
	// (Perplexity's request_cost).
	PerRequest float64 `yaml:"per_request,omitempty" json:"per_request,omitempty"`
	// Fees are USD per unit the provider reports, by name (web_search: per
	// search call).
	Fees map[string]float64 `yaml:"fees,omitempty" json:"fees,omitempty"`
	// Tiers replace the token prices of a request whose prompt (input, cache
	// read and cache write tokens together) is larger than their threshold;
	// the highest threshold below the prompt wins.
	Tiers []Tier `yaml:"tiers,omitempty" json:"tiers,omitempty"`
	// Since is when the price came into force (zero: from the beginning);
	// see dated.go.
	Since time.Time `yaml:"since,omitempty" json:"since,omitzero"`
	// Dated are the model's entries, oldest first, when herald.yaml lists
	// several; the Price itself is then the latest of them.
	Dated []Price `yaml:"-" json:"-"`
}

// Tier is the token prices above a prompt size; a price a tier leaves out
// is the base price.
type Tier struct {
	AboveInputTokens int64    `yaml:"above_input_tokens" json:"above_input_tokens"`
	Input            *float64 `yaml:"input,omitempty" json:"input,omitempty"`
	Output           *float64 `yaml:"output,omitempty" json:"output,omitempty"`
	CacheRead        *float64 `yaml:"cache_read,omitempty" json:"cache_read,omitempty"`
	CacheWrite       *float64 `yaml:"cache_write,omitempty" json:"cache_write,omitempty"`
}

// Charges is what a provider reported beyond tokens for one request.
type Charges struct {
	// Served: the provider answered the request (a per-request fee applies).
	Served bool
	// Fees counts units by fee name (web_search: 3).
	Fees map[string]int64
}

// Validate names what is wrong with p (under the key name).
func (p Price) Validate(name string) error {
	var errs []string
	if p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 || p.PerRequest < 0 {
		errs = append(errs, "prices must not be negative")
	}
	for fee, v := range p.Fees {
		if !validFeeName(fee) {
			errs = append(errs, fmt.Sprintf("fee name %q may hold only a-z, 0-9 and _", fee))
		}
		if v < 0 {
			errs = append(errs, fmt.Sprintf("fees.%s must not be negative", fee))
		}
	}
	for i, t := range p.Tiers {
		if t.AboveInputTokens <= 0 {
			errs = append(errs, fmt.Sprintf("tiers[%d].above_input_tokens must be positive", i))
		}
		for _, v := range []*float64{t.Input, t.Output, t.CacheRead, t.CacheWrite} {
			if v != nil && *v < 0 {
				errs = append(errs, fmt.Sprintf("tiers[%d]: prices must not be negative", i))
				break
			}
		}
	}
	for _, e := range p.Dated {
		if err := e.Validate(name); err != nil {
			errs = append(errs, strings.TrimPrefix(err.Error(), "pricing."+name+": "))
		}
	}
	if len(p.Dated) > 0 {
		if _, err := sortDated(p.Dated); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("pricing.%s: %s", name, strings.Join(errs, "; "))
}

// tierFor is the tier a prompt of n tokens is priced by: the one with the
// highest threshold below n; ok false when none applies.
func (p Price) tierFor(n int64) (Tier, bool) {
	var best Tier
	found := false
	for _, t := range p.Tiers {
		if n > t.AboveInputTokens && (!found || t.AboveInputTokens > best.AboveInputTokens) {
			best, found = t, true
		}
	}
	return best, found
}

// tokenPrices are the four token prices in force for a prompt of n tokens.
func (p Price) tokenPrices(n int64) (in, out, read, write float64, tier int64) {
	in, out, read, write = p.Input, p.Output, p.CacheRead, p.CacheWrite
	t, ok := p.tierFor(n)
	if !ok {
		return in, out, read, write, 0
	}
	pick := func(v *float64, base float64) float64 {
		if v != nil {
			return *v
		}
		return base
	}
	return pick(t.Input, in), pick(t.Output, out), pick(t.CacheRead, read), pick(t.CacheWrite, write), t.AboveInputTokens
}

// Cost prices u and c by p in nano-USD, and says what was applied.
// USD per million tokens is nano-USD per thousand tokens; the sum is
// rounded once, so a row's cost is reproducible from its counts.
func (p Price) Cost(u *heraldpb.Usage, c Charges) (uint64, Applied) {
	prompt := u.GetInputTokens() + u.GetCacheReadTokens() + u.GetCacheWriteTokens()
	in, out, read, write, tier := p.tokenPrices(prompt)
	tokens := float64(u.GetInputTokens())*in + float64(u.GetOutputTokens())*out +
		float64(u.GetCacheReadTokens())*read + float64(u.GetCacheWriteTokens())*write
	a := Applied{Tier: tier}
	usd := 0.0
	if c.Served && p.PerRequest > 0 {
		a.Requests = 1
		usd += p.PerRequest
	}
	for name, n := range c.Fees {
		if n <= 0 || !validFeeName(name) {
			continue
		}
		if a.Fees == nil {
			a.Fees = map[string]int64{}
		}
		a.Fees[name] = n
		usd += float64(n) * p.Fees[name]
	}
	return uint64(math.Round(tokens*1000 + usd*1e9)), a
}

func validFeeName(s string) bool {
	if s == "" || len(s) > 64 || s == "tier" || s == "requests" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// feeNames are a's fee names in order, so its string form is stable.
func (a Applied) feeNames() []string {
	names := make([]string, 0, len(a.Fees))
	for n := range a.Fees {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
