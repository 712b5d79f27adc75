package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/heraldrun/herald/proto"
	"gopkg.in/yaml.v3"
)

// Budgets cap spending in USD (beyond Hermes): per tenant, per API key and
// per schedule, in total and per day and month; a task's own cap is its
// max_cost_usd. Days and months are those of Timezone (UTC by default).
type Budgets struct {
	Tenants map[string]BudgetLimits `yaml:"tenants"`
	// Keys are keyed by API key id (herald keys list), Schedules by
	// schedule id (herald schedules list).
	Keys      map[string]BudgetLimits `yaml:"keys"`
	Schedules map[string]BudgetLimits `yaml:"schedules"`
	// DefaultTenant caps every tenant Tenants does not list.
	DefaultTenant BudgetLimits `yaml:"default_tenant"`
	// Timezone names the zone whose midnights open daily and monthly
	// windows (an IANA name, e.g. Europe/Paris); "" is UTC.
	Timezone string `yaml:"timezone"`
	// AlertThresholds are the percentages of a window whose crossing is
	// announced on herald.alerts.budget; empty: 50, 75, 90 and 100.
	AlertThresholds []float64     `yaml:"alert_thresholds"`
	Webhook         BudgetWebhook `yaml:"webhook"`
}

// BudgetLimits are the windows of one tenant, key or schedule in USD; 0 is
// no cap. In herald.yaml a plain number is the total (lifetime) figure,
// Herald's earlier form: `acme: 25.5` is `acme: {total: 25.5}`.
type BudgetLimits struct {
	Total   float64 `yaml:"total"`
	Daily   float64 `yaml:"daily"`
	Monthly float64 `yaml:"monthly"`
}

// BudgetWebhook is where budget alerts are also POSTed, signed with
// HMAC-SHA256 of the body under the secret read from SecretEnv.
type BudgetWebhook struct {
	URL string `yaml:"url"`
	// SecretEnv names the variable holding the signing secret (default
	// HERALD_BUDGET_WEBHOOK_SECRET); secrets never live in herald.yaml.
	SecretEnv string `yaml:"secret_env"`
	// MaxAttempts is how many times an alert is POSTed before it is
	// dead-lettered (default 5).
	MaxAttempts int `yaml:"max_attempts"`
	// Secret is resolved from SecretEnv at load time; never written out.
	Secret string `yaml:"-"`
}

// DefaultBudgetWebhookSecretEnv holds the webhook's signing secret unless
// budgets.webhook.secret_env names another variable.
const DefaultBudgetWebhookSecretEnv = "HERALD_BUDGET_WEBHOOK_SECRET"

// DefaultAlertThresholds are the percentages alerted when none are set.
var DefaultAlertThresholds = []float64{50, 75, 90, 100}

// UnmarshalYAML takes a number (the total) or a mapping of windows; a
// window name it does not know is an error, never a cap silently dropped.
func (b *BudgetLimits) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var total float64
		if err := n.Decode(&total); err != nil {
			return fmt.Errorf("line %d: a budget is a number of USD or a mapping of windows (total, daily, monthly), got %q", n.Line, n.Value)
		}
		*b = BudgetLimits{Total: total}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a budget is a number of USD or a mapping of windows (total, daily, monthly)", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !slices.Contains(BudgetWindows, k) {
			return fmt.Errorf("line %d: %q is not a budget window (total, daily, monthly)", n.Content[i].Line, k)
		}
	}
	type plain BudgetLimits
	var p plain
	if err := n.Decode(&p); err != nil {
		return fmt.Errorf("line %d: budget windows are numbers of USD: %v", n.Line, err)
	}
	*b = BudgetLimits(p)
	return nil
}

// BudgetWindows are the window names, as herald.yaml, alerts and errors
// write them.
var BudgetWindows = []string{"total", "daily", "monthly"}

// Window is the limit of the named window (0: none).
func (b BudgetLimits) Window(name string) float64 {
	switch name {
	case "total":
		return b.Total
	case "daily":
		return b.Daily
	case "monthly":
		return b.Monthly
	}
	return 0
}

// Any reports whether any window is capped.
func (b BudgetLimits) Any() bool { return b.Total > 0 || b.Daily > 0 || b.Monthly > 0 }

// ForTenant is the tenant's limits: its own entry, else default_tenant.
func (b Budgets) ForTenant(tenant string) BudgetLimits {
	if l, ok := b.Tenants[tenant]; ok {
		return l
	}
	return b.DefaultTenant
}

// Location is the zone of daily and monthly windows.
func (b Budgets) Location() (*time.Location, error) {
	if b.Timezone == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(b.Timezone)
}

// Thresholds are the alert percentages, ascending.
func (b Budgets) Thresholds() []float64 {
	if len(b.AlertThresholds) == 0 {
		return slices.Clone(DefaultAlertThresholds)
	}
	t := slices.Clone(b.AlertThresholds)
	slices.Sort(t)
	return slices.Compact(t)
}

// Configured reports whether any budget is set.
func (b Budgets) Configured() bool {
	if b.DefaultTenant.Any() {
		return true
	}
	for _, m := range []map[string]BudgetLimits{b.Tenants, b.Keys, b.Schedules} {
		for _, l := range m {
			if l.Any() {
				return true
			}
		}
	}
	return false
}

// resolveSecret reads the webhook's secret from its variable.
func (b *Budgets) resolveSecret(getenv func(string) string) {
	if b.Webhook.URL == "" {
		return
	}
	env := b.Webhook.SecretEnv
	if env == "" {
		env = DefaultBudgetWebhookSecretEnv
	}
	b.Webhook.Secret = getenv(env)
}

// Validate names every wrong budget setting.
func (b Budgets) Validate() error { return errors.Join(b.validate()...) }

// validate names every wrong budget setting.
func (b Budgets) validate() []error {
	var errs []error
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	limits := func(path string, l BudgetLimits) {
		for _, w := range BudgetWindows {
			check(l.Window(w) >= 0, "%s.%s must not be negative, got %v", path, w, l.Window(w))
		}
	}
	for _, m := range []struct {
		name, what string
		entries    map[string]BudgetLimits
	}{{"tenants", "a tenant name", b.Tenants}, {"keys", "an API key id", b.Keys}, {"schedules", "a schedule id", b.Schedules}} {
		for id, l := range m.entries {
			check(proto.IsToken(id), "budgets.%s: %q is not %s (letters, digits, '-' and '_', 1 to 128 of them)", m.name, id, m.what)
			limits("budgets."+m.name+"."+id, l)
		}
	}
	limits("budgets.default_tenant", b.DefaultTenant)
	if _, err := b.Location(); err != nil {
		errs = append(errs, fmt.Errorf("budgets.timezone: %q is not a time zone (an IANA name such as Europe/Paris): %v", b.Timezone, err))
	}
	for _, t := range b.AlertThresholds {
		check(t > 0 && t <= 1000, "budgets.alert_thresholds: %v is not a percentage above 0 (50 means half the window)", t)
	}
	if w := b.Webhook; w.URL != "" || w.SecretEnv != "" || w.MaxAttempts != 0 {
		check(w.URL != "", "budgets.webhook.url is required when budgets.webhook is set")
		check(w.MaxAttempts >= 0, "budgets.webhook.max_attempts must not be negative")
		if w.URL != "" {
			check(validWebhookURL(w.URL), "budgets.webhook.url: %q is not an http(s) URL", w.URL)
			env := w.SecretEnv
			if env == "" {
				env = DefaultBudgetWebhookSecretEnv
			}
			check(w.Secret != "", "budgets.webhook: its signing secret is not set: put it in the environment variable %s", env)
		}
	}
	return errs
}

func validWebhookURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
