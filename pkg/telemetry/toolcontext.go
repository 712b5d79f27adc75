package telemetry

import (
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/prometheus/client_golang/prometheus"
)

// toolContext counts what model calls paid to carry tool results (the
// context cost of a tool, docs/COSTS.md).
var toolContext = struct {
	tokens, cost *prometheus.CounterVec
}{
	tokens: counter("herald_tool_context_tokens_total",
		"Tokens of tool results carried in later model calls' prompts, by tool and how the provider billed them (input, cache_read, cache_write); estimated as characters/4.",
		"tool", "type"),
	cost: counter("herald_tool_context_cost_usd_total",
		"Money model calls spent carrying tool results in their prompts, by tool (USD, from the price table).", "tool"),
}

func init() { registry.MustRegister(toolContext.tokens, toolContext.cost) }

// ToolContext counts one tool result one model attempt carried; tool is
// its label (the caller keeps it to known tools).
func ToolContext(tool string, c *heraldpb.CarriedResult) {
	addContextTokens(tool, "input", c.GetInputTokens())
	addContextTokens(tool, "cache_read", c.GetCacheReadTokens())
	addContextTokens(tool, "cache_write", c.GetCacheWriteTokens())
	if c.GetCostNanoUsd() > 0 {
		toolContext.cost.WithLabelValues(tool).Add(float64(c.GetCostNanoUsd()) / 1e9)
	}
}

func addContextTokens(tool, typ string, n int64) {
	if n > 0 {
		toolContext.tokens.WithLabelValues(tool, typ).Add(float64(n))
	}
}
