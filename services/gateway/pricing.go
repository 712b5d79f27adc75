package gateway

import (
	"math"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// Price sources recorded with every usage event.
const (
	PriceConfig  = "config"
	PriceBuiltin = "builtin"
	PriceUnknown = "unknown"
)

// builtinPrices are list prices in USD per million tokens (standard tier,
// short-context rates) as published by each provider in late 2025. Keys are
// model-name prefixes; the longest matching prefix wins, so dated snapshots
// ("claude-sonnet-4-5-20250929") find their family.
var builtinPrices = map[string]config.Price{
	// OpenAI: cached input is billed at the cache rate; no cache-write charge.
	"gpt-5":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":   {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5-nano":   {Input: 0.05, Output: 0.40, CacheRead: 0.005},
	"gpt-5-pro":    {Input: 15, Output: 120},
	"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.50},
	"gpt-4.1-mini": {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"gpt-4.1-nano": {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"gpt-4o":       {Input: 2.50, Output: 10, CacheRead: 1.25},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"o1":           {Input: 15, Output: 60, CacheRead: 7.50},
	"o1-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.55},
	"o3":           {Input: 2, Output: 8, CacheRead: 0.50},
	"o3-pro":       {Input: 20, Output: 80},
	"o3-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.55},
	"o4-mini":      {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	// Anthropic: 5-minute cache writes at 1.25× input, cache reads at 0.1×.
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-3-5-sonnet": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	"claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.30},
	// Google Gemini (prompts up to 200k tokens).
	"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gemini-2.5-flash":      {Input: 0.30, Output: 2.50, CacheRead: 0.03},
	"gemini-2.5-flash-lite": {Input: 0.10, Output: 0.40, CacheRead: 0.01},
	"gemini-2.0-flash":      {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	// xAI: reasoning tokens are billed at the output price; Herald records
	// them inside output_tokens (profile "xai"), so they are priced once.
	"grok-4":        {Input: 3, Output: 15, CacheRead: 0.75},
	"grok-4-fast":   {Input: 0.20, Output: 0.50, CacheRead: 0.05},
	"grok-4-1-fast": {Input: 0.20, Output: 0.50, CacheRead: 0.05},
	"grok-3":        {Input: 3, Output: 15, CacheRead: 0.75},
	"grok-3-mini":   {Input: 0.30, Output: 0.50, CacheRead: 0.075},
	// Groq.
	"llama-3.3-70b-versatile": {Input: 0.59, Output: 0.79},
	"llama-3.1-8b-instant":    {Input: 0.05, Output: 0.08},
	// DeepSeek (V3.2 prices; cache hits at the cache rate).
	"deepseek-chat":     {Input: 0.28, Output: 0.42, CacheRead: 0.028},
	"deepseek-reasoner": {Input: 0.28, Output: 0.42, CacheRead: 0.028},
}

// Pricer prices usage: configured prices first, then the built-in table.
type Pricer struct {
	overrides map[string]config.Price
}

// NewPricer returns a Pricer with overrides keyed by model name.
func NewPricer(overrides map[string]config.Price) Pricer { return Pricer{overrides: overrides} }

// Lookup finds model's price and where it came from.
func (p Pricer) Lookup(model string) (config.Price, string) {
	short := model
	if i := strings.LastIndex(model, "/"); i >= 0 {
		short = model[i+1:]
	}
	for _, name := range []string{model, short} {
		if pr, ok := p.overrides[name]; ok {
			return pr, PriceConfig
		}
	}
	best := ""
	for prefix := range builtinPrices {
		if strings.HasPrefix(short, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	if best == "" {
		return config.Price{}, PriceUnknown
	}
	return builtinPrices[best], PriceBuiltin
}

// CostNano prices u for model in nano-USD. Output tokens include reasoning
// tokens under every provider's convention, so reasoning is not added again.
func (p Pricer) CostNano(model string, u *heraldpb.Usage) (uint64, string) {
	pr, src := p.Lookup(model)
	if src == PriceUnknown || u == nil {
		return 0, src
	}
	// USD per million tokens = nano-USD per 1000 tokens.
	nano := float64(u.GetInputTokens())*pr.Input + float64(u.GetOutputTokens())*pr.Output +
		float64(u.GetCacheReadTokens())*pr.CacheRead + float64(u.GetCacheWriteTokens())*pr.CacheWrite
	return uint64(math.Round(nano * 1000)), src
}
