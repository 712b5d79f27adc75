package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadBudgets(t *testing.T, yml string, env map[string]string) (Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yml), 0o644))
	cfg := Default()
	if err := cfg.readFile(path, true); err != nil {
		return cfg, err
	}
	cfg.applyEnv(func(k string) string { return env[k] })
	return cfg, cfg.Validate()
}

func TestBudgetWindowsAndTheLifetimeFormBothRead(t *testing.T) {
	cfg, err := loadBudgets(t, `
budgets:
  timezone: Europe/Paris
  alert_thresholds: [90, 50, 100, 50]
  tenants:
    acme: {daily: 50, monthly: 500}
    legacy: 25.5
    both: {total: 1000, daily: 10}
  keys: {key_abc: {daily: 5}}
  schedules: {sch_1: {monthly: 20}}
  default_tenant: {monthly: 100}
  webhook: {url: "https://hooks.example/budget", secret_env: MY_SECRET, max_attempts: 3}
`, map[string]string{"MY_SECRET": "s3cret"})
	require.NoError(t, err)
	b := cfg.Budgets
	require.Equal(t, BudgetLimits{Daily: 50, Monthly: 500}, b.Tenants["acme"])
	require.Equal(t, BudgetLimits{Total: 25.5}, b.Tenants["legacy"])
	require.Equal(t, BudgetLimits{Total: 1000, Daily: 10}, b.Tenants["both"])
	require.Equal(t, BudgetLimits{Daily: 5}, b.Keys["key_abc"])
	require.Equal(t, BudgetLimits{Monthly: 20}, b.Schedules["sch_1"])
	require.Equal(t, BudgetLimits{Monthly: 100}, b.ForTenant("globex"), "an unlisted tenant takes default_tenant")
	require.Equal(t, BudgetLimits{Total: 25.5}, b.ForTenant("legacy"))
	require.Equal(t, []float64{50, 90, 100}, b.Thresholds())
	loc, err := b.Location()
	require.NoError(t, err)
	require.Equal(t, "Europe/Paris", loc.String())
	require.Equal(t, "s3cret", b.Webhook.Secret, "the secret comes from the variable secret_env names")
	require.Equal(t, 3, b.Webhook.MaxAttempts)

	keys, err := UnknownKeys([]byte("budgets: {tenants: {acme: {daily: 1}}, keys: {k: 2}, default_tenant: {monthly: 3}, webhook: {url: u}}\n"))
	require.NoError(t, err)
	require.Empty(t, keys, "every budget key is a known key")
}

func TestMalformedBudgetsAreErrorsNamingTheSetting(t *testing.T) {
	for yml, want := range map[string]string{
		"budgets: {tenants: {acme: {dayly: 5}}}":                 `"dayly" is not a budget window (total, daily, monthly)`,
		"budgets: {tenants: {acme: lots}}":                       `a budget is a number of USD or a mapping of windows`,
		"budgets: {tenants: {acme: [1, 2]}}":                     `a budget is a number of USD or a mapping of windows`,
		"budgets: {tenants: {acme: {daily: many}}}":              `budget windows are numbers of USD`,
		"budgets: {tenants: {acme: {daily: -1}}}":                `budgets.tenants.acme.daily must not be negative`,
		"budgets: {keys: {\"k.*\": {daily: 1}}}":                 `budgets.keys: "k.*" is not an API key id`,
		"budgets: {schedules: {\"a b\": 1}}":                     `budgets.schedules: "a b" is not a schedule id`,
		"budgets: {default_tenant: {monthly: -3}}":               `budgets.default_tenant.monthly must not be negative`,
		"budgets: {timezone: Mars/Olympus}":                      `budgets.timezone: "Mars/Olympus" is not a time zone`,
		"budgets: {alert_thresholds: [0.5, 0]}":                  `budgets.alert_thresholds: 0 is not a percentage above 0`,
		"budgets: {webhook: {max_attempts: 3}}":                  `budgets.webhook.url is required`,
		"budgets: {webhook: {url: \"ftp://x\"}}":                 `budgets.webhook.url: "ftp://x" is not an http(s) URL`,
		"budgets: {webhook: {url: \"https://hooks.example/b\"}}": `budgets.webhook: its signing secret is not set: put it in the environment variable HERALD_BUDGET_WEBHOOK_SECRET`,
	} {
		_, err := loadBudgets(t, yml, nil)
		require.ErrorContains(t, err, want, yml)
	}
}
