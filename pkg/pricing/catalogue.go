package pricing

import (
	"bytes"
	"fmt"
	"math"
	"sort"
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

// number is a catalogue's price: ok when it is a number (a negative one
// too, which Validate refuses with the model named).
func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
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
