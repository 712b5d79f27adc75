package accounting

import (
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/config"
)

// Config configures the accounting service.
type Config struct {
	// DSN is clickhouse://host:port/database. Empty means no ClickHouse:
	// the service starts, consumes nothing and events wait in their streams.
	DSN string
	// BatchSize is the most events written in one INSERT.
	BatchSize int
	// FlushInterval is the longest an event waits for its batch to fill.
	FlushInterval time.Duration
	// AckWait is how long a fetched event stays ours without an ack; the sink
	// keeps it alive while ClickHouse is slow or down.
	AckWait time.Duration
	// RetryMin and RetryMax bound the backoff while ClickHouse is unreachable.
	RetryMin, RetryMax time.Duration
	// StreamCheckInterval is how often the fill of the streams is checked.
	StreamCheckInterval time.Duration
	// DashboardToken, when set, is required by the dashboard (bearer token,
	// ?token= or cookie).
	DashboardToken string
	// DashboardHosts are the names beyond loopback the dashboard answers
	// under (dashboard.allowed_hosts); any other Host header gets 403.
	DashboardHosts []string

	// afterInsert, when set (tests only), runs after a batch is stored and
	// before its messages are acked: the window a crash must not spoil.
	afterInsert func(stream string, n int)
}

// Defaults.
const (
	DefaultBatchSize     = 20000
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultAckWait       = 30 * time.Second
)

// DefaultConfig returns a Config with every default set and no DSN.
func DefaultConfig() Config {
	return Config{
		BatchSize:           DefaultBatchSize,
		FlushInterval:       DefaultFlushInterval,
		AckWait:             DefaultAckWait,
		RetryMin:            250 * time.Millisecond,
		RetryMax:            10 * time.Second,
		StreamCheckInterval: 10 * time.Second,
	}
}

// ConfigFrom derives the service configuration from Herald's configuration.
func ConfigFrom(c config.Config) Config {
	cfg := DefaultConfig()
	cfg.DSN = c.ClickHouseDSN
	cfg.DashboardToken = c.DashboardToken
	cfg.DashboardHosts = c.Dashboard.AllowedHosts
	return cfg
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BatchSize == 0 {
		c.BatchSize = d.BatchSize
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.AckWait == 0 {
		c.AckWait = d.AckWait
	}
	if c.RetryMin == 0 {
		c.RetryMin = d.RetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = d.RetryMax
	}
	if c.StreamCheckInterval == 0 {
		c.StreamCheckInterval = d.StreamCheckInterval
	}
	return c
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.BatchSize < 1 || c.BatchSize > 100_000 {
		errs = append(errs, fmt.Errorf("batch size %d: must be 1..100000", c.BatchSize))
	}
	if c.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("flush interval %s: must be positive", c.FlushInterval))
	}
	if c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("ack wait %s: must be at least 1s", c.AckWait))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("retry backoff %s..%s: must be positive and ordered", c.RetryMin, c.RetryMax))
	}
	if c.DSN != "" {
		if _, err := parseDSN(c.DSN); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
