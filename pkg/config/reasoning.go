package config

import (
	"fmt"
	"strings"
)

// Reasoning efforts a task or herald.yaml may ask for. EffortOff asks a
// reasoning model for no reasoning settings at all (nothing is sent).
const (
	EffortMinimal = "minimal"
	EffortLow     = "low"
	EffortMedium  = "medium"
	EffortHigh    = "high"
	EffortOff     = "off"
)

// Reasoning summaries (Responses API).
const (
	SummaryAuto = "auto"
	SummaryNone = "none"
)

// ReasoningSettings is what herald.yaml asks of reasoning models.
type ReasoningSettings struct {
	// Effort is minimal, low, medium, high or off.
	Effort string `yaml:"effort"`
	// BudgetTokens is Anthropic's thinking budget; it wins over Effort there.
	BudgetTokens int64 `yaml:"budget_tokens"`
	// Summary is auto or none: whether the Responses API sends summaries.
	Summary string `yaml:"summary"`
}

// Reasoning is herald.yaml's `reasoning:`: the default settings, and
// settings per model (by model name or name prefix, longest first; the
// name after a vendor's "/" counts too) that replace them field by field.
type Reasoning struct {
	ReasoningSettings `yaml:",inline"`
	PerModel          map[string]ReasoningSettings `yaml:"per_model"`
}

// For is the settings in force for model: the default, with the fields the
// longest matching per_model entry sets replacing it.
func (r Reasoning) For(model string) ReasoningSettings {
	out := r.ReasoningSettings
	name, short := strings.ToLower(model), strings.ToLower(model)
	if i := strings.LastIndex(short, "/"); i >= 0 {
		short = short[i+1:]
	}
	best, found := "", false
	var pick ReasoningSettings
	for k, v := range r.PerModel {
		lk := strings.ToLower(k)
		if (strings.HasPrefix(name, lk) || strings.HasPrefix(short, lk)) && (!found || len(lk) > len(best)) {
			best, pick, found = lk, v, true
		}
	}
	if !found {
		return out
	}
	return out.With(pick)
}

// With is s with every field o sets replacing it.
func (s ReasoningSettings) With(o ReasoningSettings) ReasoningSettings {
	if o.Effort != "" {
		s.Effort = o.Effort
	}
	if o.BudgetTokens != 0 {
		s.BudgetTokens = o.BudgetTokens
	}
	if o.Summary != "" {
		s.Summary = o.Summary
	}
	return s
}

// ValidEffort reports whether e is an effort Herald understands ("" too).
func ValidEffort(e string) bool {
	switch e {
	case "", EffortMinimal, EffortLow, EffortMedium, EffortHigh, EffortOff:
		return true
	}
	return false
}

// Validate names the key of a wrong value.
func (r Reasoning) Validate() error {
	var errs []string
	check := func(key string, s ReasoningSettings) {
		if !ValidEffort(s.Effort) {
			errs = append(errs, fmt.Sprintf("%s.effort must be minimal, low, medium, high or off, got %q", key, s.Effort))
		}
		if s.BudgetTokens < 0 || (s.BudgetTokens > 0 && s.BudgetTokens < 1024) {
			errs = append(errs, fmt.Sprintf("%s.budget_tokens must be at least 1024 (Anthropic's minimum), got %d", key, s.BudgetTokens))
		}
		if s.Summary != "" && s.Summary != SummaryAuto && s.Summary != SummaryNone {
			errs = append(errs, fmt.Sprintf("%s.summary must be auto or none, got %q", key, s.Summary))
		}
	}
	check("reasoning", r.ReasoningSettings)
	for m, s := range r.PerModel {
		check("reasoning.per_model."+m, s)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}
