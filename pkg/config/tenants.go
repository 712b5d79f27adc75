package config

import (
	"fmt"
	"regexp"
)

// TenantLimits are one tenant's limits (`tenants: {acme: {...}}`): the one
// place per-tenant limits live, whichever service enforces them.
type TenantLimits struct {
	// MaxConcurrentRuns caps the runs (api requests that start a turn) the
	// tenant has going at once; 0 is no cap.
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
}

// API configures the api service (`api:`).
type API struct {
	// OverLimit is what a run beyond a concurrency limit gets: "queue" (the
	// default: it waits its turn, in order) or "reject" (429 with Retry-After).
	OverLimit string `yaml:"over_limit"`
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
		if l.MaxConcurrentRuns < 0 {
			errs = append(errs, fmt.Errorf("tenants.%s.max_concurrent_runs must not be negative", name))
		}
	}
	switch c.API.OverLimit {
	case "", OverLimitQueue, OverLimitReject:
	default:
		errs = append(errs, fmt.Errorf("api.over_limit must be queue or reject, got %q", c.API.OverLimit))
	}
	return errs
}
