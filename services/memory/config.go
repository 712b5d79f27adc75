package memory

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/heraldrun/herald/pkg/config"
)

// Character limits of the two stores (Hermes' defaults).
const (
	DefaultMemoryLimit = 2200
	DefaultUserLimit   = 1375
)

// Config is the memory service's configuration.
type Config struct {
	// MemoryLimit and UserLimit cap each store's total characters.
	MemoryLimit int
	UserLimit   int
	// Concurrency caps the tool calls one process handles at once.
	Concurrency int
	// IndexPath is where the session-search index is saved; empty keeps it in
	// memory only (rebuilt from the SESSIONS stream at every start).
	IndexPath string
	// IndexSaveEvery is how often a changed index is written to IndexPath.
	IndexSaveEvery time.Duration
	// DefaultTenant serves requests that name no tenant.
	DefaultTenant string
}

// DefaultConfig returns the configuration used when nothing is set.
func DefaultConfig() Config {
	return Config{
		MemoryLimit:    DefaultMemoryLimit,
		UserLimit:      DefaultUserLimit,
		Concurrency:    16,
		IndexSaveEvery: 2 * time.Minute,
		DefaultTenant:  "default",
	}
}

// ConfigFrom derives the service's configuration from the global one; the
// search index lives at <data-dir>/memory/session-index.gob.
func ConfigFrom(c config.Config) Config {
	cfg := DefaultConfig()
	if c.DataDir != "" {
		cfg.IndexPath = filepath.Join(c.DataDir, "memory", "session-index.gob")
	}
	if c.Tenant != "" {
		cfg.DefaultTenant = c.Tenant
	}
	return cfg
}

// Validate fails fast on settings the service cannot work with.
func (c Config) Validate() error {
	var errs []error
	if c.MemoryLimit <= 0 || c.UserLimit <= 0 {
		errs = append(errs, errors.New("memory: store limits must be positive"))
	}
	if c.Concurrency <= 0 {
		errs = append(errs, errors.New("memory: concurrency must be positive"))
	}
	if c.IndexSaveEvery <= 0 {
		errs = append(errs, errors.New("memory: index save interval must be positive"))
	}
	if c.DefaultTenant == "" {
		errs = append(errs, errors.New("memory: default tenant must be set"))
	}
	return errors.Join(errs...)
}

func (c Config) limit(target string) int {
	if target == TargetUser {
		return c.UserLimit
	}
	return c.MemoryLimit
}
