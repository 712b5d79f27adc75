package config

import (
	"fmt"
	"regexp"
)

// TenantLimits are one tenant's limits (`tenants: {acme: {...}}`): the one
// place per-tenant limits live, whichever service enforces them.
type TenantLimits struct {
	// MaxConcurrentRuns caps the runs (api requests that start a turn) the
	// tenant has going at once; 0 is no cap. A run is a session's turn, so
	// this is MaxConcurrentSessions by its api name (SessionLimit).
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
	// Weight is the tenant's share of every service's handlers when several
	// tenants have work waiting (default 1: equal shares).
	Weight int `yaml:"weight"`
	// MaxConcurrentSessions caps the tenant's sessions with a turn going at
	// once, across every process; a task beyond it waits (its session's
	// events say queued, with its position) and starts in its order.
	MaxConcurrentSessions int `yaml:"max_concurrent_sessions"`
	// MaxConcurrentModelCalls caps the tenant's model calls in flight at
	// once, across every gateway; a call beyond it waits its turn.
	MaxConcurrentModelCalls int `yaml:"max_concurrent_model_calls"`
	// Pools are the tool-runner pools the tenant's bound tasks may run
	// their tools in, the first their default; a pool listed here is
	// reserved to the tenants that list it (TenantPool).
	Pools []string `yaml:"pools"`
}

// SessionLimit is the tenant's cap on sessions with a turn going (0: none):
// max_concurrent_sessions and the api's max_concurrent_runs are one limit,
// the smaller when both are set.
func (l TenantLimits) SessionLimit() int {
	switch {
	case l.MaxConcurrentSessions <= 0:
		return max(l.MaxConcurrentRuns, 0)
	case l.MaxConcurrentRuns <= 0:
		return l.MaxConcurrentSessions
	}
	return min(l.MaxConcurrentSessions, l.MaxConcurrentRuns)
}

// TenantWeight is tenant's fair-share weight (1 unless configured).
func (c Config) TenantWeight(tenant string) int {
	if w := c.Tenants[tenant].Weight; w > 0 {
		return w
	}
	return 1
}

// API configures the api service (`api:`).
type API struct {
	// OverLimit is what a run beyond a concurrency limit gets: "queue" (the
	// default: it waits its turn, in order) or "reject" (429 with Retry-After).
	OverLimit string `yaml:"over_limit"`
	// MaxQueuedRuns caps the runs of one tenant waiting in an api process
	// (0 or unset: 1000); a run beyond it is refused with 429.
	MaxQueuedRuns int `yaml:"max_queued_runs"`
}

// Over-limit policies of the api service.
const (
	OverLimitQueue  = "queue"
	OverLimitReject = "reject"
)

// tenantName is what a tenant may be called: one subject token.
var tenantName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ValidTenant reports whether name can name a tenant.
func ValidTenant(name string) bool { return tenantName.MatchString(name) }

func (c Config) validateTenants() []error {
	var errs []error
	for name, l := range c.Tenants {
		if !ValidTenant(name) {
			errs = append(errs, fmt.Errorf("tenants: %q is not a tenant name (letters, digits, '-' and '_', at most 128)", name))
		}
		for _, f := range []struct {
			key string
			v   int
		}{{"max_concurrent_runs", l.MaxConcurrentRuns}, {"weight", l.Weight},
			{"max_concurrent_sessions", l.MaxConcurrentSessions}, {"max_concurrent_model_calls", l.MaxConcurrentModelCalls}} {
			if f.v < 0 {
				errs = append(errs, fmt.Errorf("tenants.%s.%s must not be negative", name, f.key))
			}
		}
		if l.Weight > 1000 {
			errs = append(errs, fmt.Errorf("tenants.%s.weight must be at most 1000, got %d", name, l.Weight))
		}
	}
	switch c.API.OverLimit {
	case "", OverLimitQueue, OverLimitReject:
	default:
		errs = append(errs, fmt.Errorf("api.over_limit must be queue or reject, got %q", c.API.OverLimit))
	}
	if c.API.MaxQueuedRuns < 0 {
		errs = append(errs, fmt.Errorf("api.max_queued_runs must not be negative, got %d", c.API.MaxQueuedRuns))
	}
	return errs
}
