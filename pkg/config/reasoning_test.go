package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadYAML(t *testing.T, text string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	return cfg, cfg.Validate()
}

func TestReasoningDefaultAndPerModel(t *testing.T) {
	cfg, err := loadYAML(t, `
reasoning:
  effort: medium
  summary: auto
  per_model:
    claude-sonnet-4: {budget_tokens: 12000}
    claude-sonnet-4-5: {effort: high}
    gpt-5-nano: {effort: "off"}
pricing:
  gemini-2.5-pro:
    input: 1.25
    output: 10
    tiers: [{above_input_tokens: 200000, input: 2.5, output: 15}]
  sonar: {input: 1, output: 1, per_request: 0.005, fees: {web_search: 0.01}}
`)
	require.NoError(t, err)
	r := cfg.Reasoning
	require.Equal(t, ReasoningSettings{Effort: "medium", Summary: "auto"}, r.For("gpt-5-mini"), "the default")
	require.Equal(t, ReasoningSettings{Effort: "medium", BudgetTokens: 12000, Summary: "auto"}, r.For("claude-sonnet-4-20250514"))
	require.Equal(t, ReasoningSettings{Effort: "high", Summary: "auto"}, r.For("anthropic/claude-sonnet-4-5"),
		"the longest prefix wins, after a vendor's /")
	require.Equal(t, "off", r.For("gpt-5-nano").Effort)
	p := cfg.Pricing["gemini-2.5-pro"]
	require.Equal(t, int64(200000), p.Tiers[0].AboveInputTokens)
	require.Equal(t, 15.0, *p.Tiers[0].Output)
	require.Nil(t, p.Tiers[0].CacheRead, "a tier leaves out what stays at the base price")
	require.Equal(t, 0.005, cfg.Pricing["sonar"].PerRequest)
	require.Equal(t, 0.01, cfg.Pricing["sonar"].Fees["web_search"])
}

func TestReasoningRefusesWhatNoProviderTakes(t *testing.T) {
	_, err := loadYAML(t, `
reasoning:
  effort: extreme
  budget_tokens: 500
  summary: detailed
  per_model:
    o3: {effort: maximal}
`)
	require.Error(t, err)
	for _, want := range []string{`reasoning.effort must be minimal, low, medium, high or off, got "extreme"`,
		"reasoning.budget_tokens must be at least 1024", `reasoning.summary must be auto or none, got "detailed"`,
		`reasoning.per_model.o3.effort`} {
		require.Contains(t, err.Error(), want)
	}
	_, err = loadYAML(t, "pricing:\n  m: {input: 1, tiers: [{above_input_tokens: 0}]}\n")
	require.ErrorContains(t, err, "pricing.m: tiers[0].above_input_tokens must be positive")
}
