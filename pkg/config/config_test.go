package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadLayersFileEnvAndKeepsKeysOutOfYAML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
model:
  default: claude-sonnet-4
  provider: anthropic
agent:
  max_turns: 12
fallback_providers:
  - {provider: openai, model: gpt-4o, api_key_env: FB_KEY}
pricing:
  my-model: {input: 1, output: 2}
budgets:
  tenants: {acme: 25.5}
`), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "FB_KEY": "sk-fb", "HERALD_MODEL": "claude-haiku-4"}
	cfg.applyEnv(func(k string) string { return env[k] })
	require.NoError(t, cfg.Validate())
	require.Equal(t, "claude-haiku-4", cfg.Primary.Model, "environment overrides the file")
	require.Equal(t, "anthropic", cfg.Primary.Provider)
	require.Equal(t, "sk-ant", cfg.Primary.APIKey)
	require.Equal(t, "sk-fb", cfg.FallbackProviders[0].APIKey)
	require.Equal(t, 12, cfg.Agent.MaxTurns)
	require.Equal(t, 20, cfg.Compression.ProtectLastN, "defaults survive a partial file")
	require.Equal(t, 2.0, cfg.Pricing["my-model"].Output)
	require.Equal(t, BudgetLimits{Total: 25.5}, cfg.Budgets.Tenants["acme"], "a plain number is the lifetime (total) figure")
}

func TestModelAsPlainString(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte("model: gpt-4.1\n"), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	require.Equal(t, "gpt-4.1", cfg.Primary.Model)
}

func TestValidateNamesTheBadSetting(t *testing.T) {
	cfg := Default()
	cfg.Approvals.Mode = "sometimes"
	cfg.Compression.Threshold = 2
	cfg.NATSDeclare = "never"
	err := cfg.Validate()
	require.ErrorContains(t, err, "approvals.mode")
	require.ErrorContains(t, err, "compression.threshold")
	require.ErrorContains(t, err, `nats_declare must be auto or check, got "never"`)
}

func TestMissingExplicitFileIsAnError(t *testing.T) {
	cfg := Default()
	require.Error(t, cfg.readFile(filepath.Join(t.TempDir(), "nope.yaml"), true))
	require.NoError(t, cfg.readFile(filepath.Join(t.TempDir(), "nope.yaml"), false))
}

// A budget keyed by something that is not a tenant name could never match a
// tenant (the subject refuses such names), so it is a configuration error.
func TestBudgetTenantKeysMustBeTenantNames(t *testing.T) {
	for _, bad := range []string{"café", strings.Repeat("a", 129), "acme.*", "a b", ""} {
		cfg := Default()
		cfg.Budgets.Tenants = map[string]BudgetLimits{bad: {Total: 1}}
		require.ErrorContains(t, cfg.Validate(), "is not a tenant name", "%q", bad)
	}
	cfg := Default()
	cfg.Tenant = "café"
	require.ErrorContains(t, cfg.Validate(), `tenant: "café" is not a tenant name`)
	cfg = Default()
	cfg.Budgets.Tenants = map[string]BudgetLimits{"acme_2-x": {Total: 1}, strings.Repeat("a", 128): {Daily: 1}}
	require.NoError(t, cfg.Validate())
}

// A tenant's limits are counts: a negative one, or a weight past 1000, is a
// configuration error naming the key; max_concurrent_runs and
// max_concurrent_sessions are one limit, the smaller counting.
func TestTenantLimitsAreCheckedAndOneSessionLimit(t *testing.T) {
	cfg := Default()
	cfg.Tenants = map[string]TenantLimits{"acme": {MaxConcurrentModelCalls: -1}}
	require.ErrorContains(t, cfg.Validate(), "tenants.acme.max_concurrent_model_calls must not be negative")
	cfg.Tenants = map[string]TenantLimits{"acme": {Weight: 1001}}
	require.ErrorContains(t, cfg.Validate(), "tenants.acme.weight must be at most 1000")
	require.Equal(t, 3, TenantLimits{MaxConcurrentRuns: 5, MaxConcurrentSessions: 3}.SessionLimit())
	require.Equal(t, 5, TenantLimits{MaxConcurrentRuns: 5}.SessionLimit())
	require.Equal(t, 0, TenantLimits{}.SessionLimit())
	cfg.Tenants = map[string]TenantLimits{"acme": {Weight: 3}}
	require.Equal(t, 3, cfg.TenantWeight("acme"))
	require.Equal(t, 1, cfg.TenantWeight("globex"))
}
