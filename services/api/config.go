package api

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/heraldrun/herald/pkg/config"
)

// Config is the api service's configuration.
type Config struct {
	// Listen is the address the service serves HTTP on; "" leaves serving
	// to the caller (herald up mounts Handler on the dashboard's address).
	Listen string
	// OverLimit is config.OverLimitQueue or config.OverLimitReject.
	OverLimit string
	// MaxQueuedRuns caps each tenant's runs waiting in this process
	// (0: DefaultMaxQueuedRuns).
	MaxQueuedRuns int
	// BodyTimeout bounds the reading of a request body (0:
	// DefaultBodyTimeout); the headers have their own bound, and an event
	// stream, which reads no body, none.
	BodyTimeout time.Duration
	// TenantRuns caps each named tenant's concurrent runs (0: no cap):
	// its max_concurrent_runs or max_concurrent_sessions, the smaller.
	TenantRuns map[string]int
	// DefaultTenant is the tenant of a run started without a key and
	// without a tenant in its body.
	DefaultTenant string
	// TenantPool says which tool-runner pool a tenant's task may run in
	// (config.Config.TenantPool; nil: any): a keyed run naming a pool
	// outside its tenant's is refused at the door, not dead-lettered later.
	TenantPool func(tenant, named, fallback string) (string, error)
	// AllowedHosts are the Host names beyond loopback a request may name
	// while no key exists (dashboard.allowed_hosts).
	AllowedHosts []string
}

// ConfigFrom reads the api service's settings from Herald's configuration.
func ConfigFrom(c config.Config) Config {
	cfg := Config{OverLimit: c.API.OverLimit, MaxQueuedRuns: c.API.MaxQueuedRuns, TenantRuns: map[string]int{},
		DefaultTenant: c.Tenant, AllowedHosts: c.Dashboard.AllowedHosts, TenantPool: c.TenantPool}
	for name, l := range c.Tenants {
		// a run is a session's turn: one limit with the loop's
		cfg.TenantRuns[name] = l.SessionLimit()
	}
	if cfg.OverLimit == "" {
		cfg.OverLimit = config.OverLimitQueue
	}
	return cfg
}

// DefaultBodyTimeout is how long reading a request body may take unless
// configured: a prompt's few hundred KiB even on a slow link.
const DefaultBodyTimeout = 30 * time.Second

func (c Config) maxQueuedRuns() int { return cmp.Or(c.MaxQueuedRuns, DefaultMaxQueuedRuns) }

func (c Config) bodyTimeout() time.Duration { return cmp.Or(c.BodyTimeout, DefaultBodyTimeout) }

// Validate fails fast on settings the service cannot work with.
func (c Config) Validate() error {
	var errs []error
	if c.OverLimit != config.OverLimitQueue && c.OverLimit != config.OverLimitReject {
		errs = append(errs, fmt.Errorf("api.over_limit must be queue or reject, got %q", c.OverLimit))
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			errs = append(errs, fmt.Errorf("--listen %q: %w", c.Listen, err))
		}
	}
	if c.MaxQueuedRuns < 0 {
		errs = append(errs, fmt.Errorf("api.max_queued_runs must not be negative, got %d", c.MaxQueuedRuns))
	}
	if c.BodyTimeout < 0 {
		errs = append(errs, fmt.Errorf("the request body timeout must not be negative, got %s", c.BodyTimeout))
	}
	for name, n := range c.TenantRuns {
		if n < 0 {
			errs = append(errs, fmt.Errorf("tenants.%s.max_concurrent_runs must not be negative", name))
		}
	}
	return errors.Join(errs...)
}
