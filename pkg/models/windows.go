// Package models knows facts about model families that more than one service
// needs: context windows. Prices are the gateway's alone.
package models

import "strings"

// DefaultContextWindow is assumed for models the table does not know.
const DefaultContextWindow = 128000

// contextWindows maps a model-name prefix to its context window in tokens;
// the longest matching prefix wins.
var contextWindows = map[string]int{
	"gpt-4o":          128000,
	"gpt-4.1":         1047576,
	"gpt-5":           400000,
	"o3":              200000,
	"o4-mini":         200000,
	"claude":          200000,
	"claude-sonnet-4": 200000,
	"gemini-2.5":      1048576,
	"deepseek":        128000,
	"llama":           128000,
	"qwen":            131072,
	"scripted":        128000,
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
