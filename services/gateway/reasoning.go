package gateway

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// reasoningAsk is what one call asks of a reasoning model: herald.yaml's
// settings for the model, with the request's own (a task's
// reasoning_effort) replacing them. The zero value asks nothing.
type reasoningAsk struct {
	effort  string
	budget  int64
	summary string
}

// resolveReasoning is the ask for model: the configured settings, then the
// request's. A request's effort replaces the configured budget too (the
// budget then follows from the effort), so `--reasoning low` is low even
// where herald.yaml sets a large budget; "off" asks nothing.
func resolveReasoning(cfg config.Reasoning, model string, req *heraldpb.Reasoning) reasoningAsk {
	s := cfg.For(model)
	if req != nil {
		if req.GetEffort() != "" {
			s.Effort, s.BudgetTokens = req.GetEffort(), 0
		}
		s = s.With(config.ReasoningSettings{BudgetTokens: req.GetBudgetTokens(), Summary: req.GetSummary()})
	}
	if s.Effort == config.EffortOff {
		return reasoningAsk{}
	}
	return reasoningAsk{effort: s.Effort, budget: s.BudgetTokens, summary: s.Summary}
}

func (a reasoningAsk) on() bool { return a.effort != "" || a.budget > 0 }

// key names the ask in a kept frame's key.
func (a reasoningAsk) key() string { return fmt.Sprintf("%s/%d/%s", a.effort, a.budget, a.summary) }

// Anthropic thinking budgets of each effort when no budget_tokens is set
// (1024 is the API's minimum budget).
var anthropicBudgets = map[string]int64{
	config.EffortMinimal: 1024,
	config.EffortLow:     2048,
	config.EffortMedium:  8192,
	config.EffortHigh:    16384,
}

// anthropicBudget is the thinking budget of a: budget_tokens wins over
// effort; 0 when nothing is asked.
func (a reasoningAsk) anthropicBudget() int64 {
	if a.budget > 0 {
		return a.budget
	}
	return anthropicBudgets[a.effort]
}

// Where a profile puts the reasoning ask of a chat-completions request.
const (
	// ReasoningParamEffort: top-level "reasoning_effort" (OpenAI, Groq, xAI,
	// Gemini's OpenAI endpoint, and every compatible server as configured).
	ReasoningParamEffort = "reasoning_effort"
	// ReasoningParamObject: "reasoning": {"effort"} or {"max_tokens"} (OpenRouter).
	ReasoningParamObject = "reasoning"
	// ReasoningParamNone: never sent (the provider refuses unknown fields or
	// chooses reasoning by model).
	ReasoningParamNone = "none"
)

// Models whose providers accept a reasoning ask; a model outside these is
// sent none, since the provider refuses the field on it.
var (
	openaiReasoners    = regexp.MustCompile(`^(o[1-9]|gpt-5|codex-mini)`)
	openaiNoEffort     = regexp.MustCompile(`^(o1-mini|o1-preview|gpt-5(\.\d+)?-chat)`)
	openaiMinimal      = regexp.MustCompile(`^gpt-5`)
	groqEffort         = regexp.MustCompile(`^(openai/)?gpt-oss`)
	groqQwen           = regexp.MustCompile(`^(qwen/)?qwen3`)
	xaiEffort          = regexp.MustCompile(`^grok-3-mini`)
	geminiThinkers     = regexp.MustCompile(`^(models/)?gemini-(2\.5|[3-9])`)
	anthropicThinkers  = regexp.MustCompile(`^claude-(3-7-sonnet|(opus|sonnet|haiku)-[4-9]|[4-9])`)
	anthropicInterleav = regexp.MustCompile(`^claude-((opus|sonnet|haiku)-[4-9]|[4-9])`)
)

// chatReasoning is the field and value a chat-completions request carries
// for a on model; ok false sends nothing.
func (p Profile) chatReasoning(model string, a reasoningAsk) (field string, value any, ok bool) {
	if !a.on() || p.ReasoningParam == ReasoningParamNone {
		return "", nil, false
	}
	m := strings.ToLower(model)
	effort := a.effort
	switch p.Name {
	case "openai", "azure":
		if !openaiReasoners.MatchString(m) || openaiNoEffort.MatchString(m) || effort == "" {
			return "", nil, false
		}
		if effort == config.EffortMinimal && !openaiMinimal.MatchString(m) {
			effort = config.EffortLow // o-series: low, medium, high
		}
	case "groq":
		switch {
		case groqEffort.MatchString(m) && effort != "":
			if effort == config.EffortMinimal {
				effort = config.EffortLow
			}
		case groqQwen.MatchString(m):
			effort = "default" // Qwen3 on Groq: none | default
		default:
			return "", nil, false
		}
	case "xai":
		if !xaiEffort.MatchString(m) || effort == "" {
			return "", nil, false // grok-4 reasons always and refuses the field
		}
		effort = map[string]string{config.EffortMinimal: "low", config.EffortLow: "low",
			config.EffortMedium: "high", config.EffortHigh: "high"}[effort]
	case "gemini":
		if !geminiThinkers.MatchString(m) || effort == "" {
			return "", nil, false
		}
		if effort == config.EffortMinimal {
			effort = config.EffortLow
		}
	}
	if p.ReasoningParam == ReasoningParamObject {
		if effort != "" {
			return "reasoning", map[string]any{"effort": effort}, true
		}
		return "reasoning", map[string]any{"max_tokens": a.budget}, true
	}
	if effort == "" {
		return "", nil, false
	}
	return "reasoning_effort", effort, true
}

// responsesReasons reports whether the Responses API request for model
// carries the reasoning settings and asks for encrypted reasoning: OpenAI's
// reasoning models always (they reason by default, and with store: false
// their reasoning is lost between calls otherwise), any model on a generic
// endpoint when reasoning is asked.
func (p Profile) responsesReasons(model string, a reasoningAsk) bool {
	switch p.Name {
	case "openai", "azure":
		m := strings.ToLower(model)
		return openaiReasoners.MatchString(m) && !openaiNoEffort.MatchString(m)
	}
	return a.on() && p.ReasoningParam != ReasoningParamNone
}

// anthropicThinks reports whether model takes extended thinking; on an
// endpoint whose profile is not Anthropic's own it is sent as configured.
func (p Profile) anthropicThinks(model string) bool {
	if p.Name != "anthropic" && p.Name != "openrouter" {
		return true
	}
	return anthropicThinkers.MatchString(shortModel(model))
}

func shortModel(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	return m
}
