package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/config"
)

// Config is what the gateway needs to know. Knobs that herald.yaml does not
// carry (Concurrency, RateLimitCooldown, StreamIdleTimeout, Now)
// have defaults here.
type Config struct {
	// Primary serves every call unless it fails over or is cooling down.
	Primary config.Provider
	// Fallbacks are tried in order when the primary cannot serve a call.
	Fallbacks []config.Provider
	// MaxAttempts bounds the attempts on one provider for one call
	// (agent.api_max_retries, as Hermes counts it: 3 means three tries).
	MaxAttempts int
	Retry       config.Retry
	// Pricing overrides the built-in price table, keyed by model name.
	Pricing map[string]config.Price
	// Tenant is used for requests that name none.
	Tenant string
	// Budgets caps what tenants, API keys and schedules may spend, in
	// total and per day and month (herald.yaml's budgets).
	Budgets config.Budgets
	// Now is the clock of budget windows (tests set it); nil is time.Now.
	Now func() time.Time
	// WebhookRetryDelays are the waits between POSTs of a budget alert to
	// budgets.webhook (the last repeats); empty: 1s, 5s, 30s, 2m, 10m.
	WebhookRetryDelays []time.Duration
	// RateLimitCooldown keeps a rate-limited provider out of the chain.
	RateLimitCooldown time.Duration
	// Concurrency caps the calls this process works on at once.
	Concurrency int
	// StreamIdleTimeout cuts a streamed answer that stays silent this long.
	StreamIdleTimeout time.Duration
	// Profiles override provider profiles by provider name (herald.yaml's providers).
	Profiles map[string]config.ProviderProfile
	// Reasoning is herald.yaml's reasoning settings, default and per model.
	Reasoning config.Reasoning
}

// Defaults of the knobs herald.yaml does not carry.
const (
	// DefaultConcurrency is high because a model call is a wait on the
	// network, not work: each one in flight costs a goroutine, its request
	// and a connection. What a provider can take is bounded per provider by
	// providers.<name>.max_concurrent, rpm and tpm (limits.go), across every
	// gateway process; this only guards the process's memory.
	DefaultConcurrency       = 2048
	DefaultRateLimitCooldown = 60 * time.Second
	DefaultStreamIdleTimeout = 180 * time.Second
	maxRetryAfter            = 120 * time.Second
)

// ConfigFrom derives the gateway's configuration from the global one.
func ConfigFrom(c config.Config) Config {
	return Config{
		Primary:           c.Primary,
		Fallbacks:         append([]config.Provider(nil), c.FallbackProviders...),
		MaxAttempts:       c.Agent.APIMaxRetries,
		Retry:             c.Retry,
		Pricing:           c.Pricing,
		Tenant:            c.Tenant,
		Budgets:           c.Budgets,
		RateLimitCooldown: DefaultRateLimitCooldown,
		Concurrency:       DefaultConcurrency,
		Profiles:          c.Providers,
		Reasoning:         c.Reasoning,
	}.withDefaults()
}

func (c Config) withDefaults() Config {
	d := config.Default()
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 1
	}
	if c.Retry.BaseDelay <= 0 {
		c.Retry.BaseDelay = d.Retry.BaseDelay
	}
	if c.Retry.MaxDelay <= 0 {
		c.Retry.MaxDelay = d.Retry.MaxDelay
	}
	if c.Retry.RateBaseDelay <= 0 {
		c.Retry.RateBaseDelay = d.Retry.RateBaseDelay
	}
	if c.Retry.RateMaxDelay <= 0 {
		c.Retry.RateMaxDelay = d.Retry.RateMaxDelay
	}
	if c.Retry.CallTimeout <= 0 {
		c.Retry.CallTimeout = d.Retry.CallTimeout
	}
	if c.Tenant == "" {
		c.Tenant = d.Tenant
	}
	if c.RateLimitCooldown <= 0 {
		c.RateLimitCooldown = DefaultRateLimitCooldown
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.StreamIdleTimeout <= 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	return c
}

// Validate fails fast on a configuration no call could be served with.
func (c Config) Validate() error {
	var errs []error
	if c.Primary.Model == "" {
		errs = append(errs, errors.New("gateway: the primary model is not set (model in herald.yaml or HERALD_MODEL)"))
	}
	for i, p := range c.Fallbacks {
		if p.Model == "" {
			errs = append(errs, fmt.Errorf("gateway: fallback_providers[%d].model is required", i))
		}
	}
	for i, p := range append([]config.Provider{c.Primary}, c.Fallbacks...) {
		if _, err := newEndpoint(p, i, c.Profiles); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Budgets.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gateway: %w", err))
	}
	return errors.Join(errs...)
}
