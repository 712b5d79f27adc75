// Package models knows facts about model families that more than one service
// needs: context windows. Prices are the gateway's alone.
package models

import "strings"

// DefaultContextWindow is assumed for models the table does not know.
const DefaultContextWindow = 128000

// contextWindows maps a model-name prefix to its context window in tokens;
// the longest matching prefix wins.
var contextWindows = map[string]int{
	"gpt-3.5-turbo":    16385,
	"gpt-4":            8192,
	"gpt-4-32k":        32768,
	"gpt-4-turbo":      128000,
	"gpt-4o":           128000,
	"gpt-4.1":          1047576,
	"gpt-5":            400000,
	"o1":               200000,
	"o1-mini":          128000,
	"o3":               200000,
	"o4-mini":          200000,
	"claude":           200000,
	"claude-sonnet-4":  200000,
	"gemini-1.5-pro":   2097152,
	"gemini-1.5-flash": 1048576,
	"gemini-2.0":       1048576,
	"gemini-2.5":       1048576,
	"mistral":          32768,
	"mistral-large":    131072,
	"mixtral":          32768,
	"codestral":        256000,
	"deepseek":         128000,
	"llama":            128000,
	"llama3":           8192,
	"llama3.1":         131072,
	"llama3.2":         131072,
	"llama3.3":         131072,
	"qwen":             131072,
	"qwen2.5-coder":    32768,
	"scripted":         128000,
}

// ContextWindow returns the window of model, preferring overrides (from
// herald.yaml's context_windows), then the built-in table.
func ContextWindow(model string, overrides map[string]int) int {
	if n, ok := overrides[model]; ok && n > 0 {
		return n
	}
	if i := strings.LastIndex(model, "/"); i >= 0 {
		model = model[i+1:]
	}
	best, n := "", DefaultContextWindow
	for prefix, w := range contextWindows {
		if strings.HasPrefix(model, prefix) && len(prefix) > len(best) {
			best, n = prefix, w
		}
	}
	return n
}

// EstimateTokens is the fallback token count when a provider reports none.
func EstimateTokens(chars int) int64 { return int64(chars/4 + 1) }
