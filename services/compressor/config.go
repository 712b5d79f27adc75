package compressor

import (
	"errors"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	redaction "github.com/heraldrun/herald/pkg/redact"
)

// Config is the compressor's configuration.
type Config struct {
	// ProtectFirstN and ProtectLastN are used when a request sets none.
	ProtectFirstN int
	ProtectLastN  int
	// Threshold is the share of the context window that triggers compression;
	// a history pruned below FitRatio of it needs no summary.
	Threshold float64
	FitRatio  float64
	// TargetRatio sizes the summary relative to the middle it replaces.
	TargetRatio float64
	// ContextWindows overrides the built-in model table.
	ContextWindows map[string]int
	// LLMSummary asks the model for pass 3; false always writes the
	// deterministic summary.
	LLMSummary bool
	// SummaryTimeout bounds the wait for the gateway's answer (its retries
	// included); past it the deterministic summary is used.
	SummaryTimeout time.Duration
	// Concurrency caps the requests one process handles at once.
	Concurrency int
	// MinPruneChars: tool outputs shorter than this are left as they are.
	MinPruneChars int
	// Keys are the configured provider keys: a summary holds no run of 12
	// or more of their characters (beyond the shapes redact knows).
	Keys redaction.Secrets
}

// DefaultConfig returns the configuration used when nothing is set.
func DefaultConfig() Config {
	return Config{
		ProtectFirstN: 3, ProtectLastN: 20, Threshold: 0.5, FitRatio: 0.8, TargetRatio: 0.2,
		LLMSummary: true, SummaryTimeout: 3 * time.Minute, Concurrency: 8, MinPruneChars: 200,
	}
}

// ConfigFrom derives the configuration from herald.yaml's compression keys.
func ConfigFrom(c config.Config) Config {
	cfg := DefaultConfig()
	cc := c.Compression
	if cc.ProtectFirstN > 0 {
		cfg.ProtectFirstN = cc.ProtectFirstN
	}
	if cc.ProtectLastN > 0 {
		cfg.ProtectLastN = cc.ProtectLastN
	}
	if cc.Threshold > 0 {
		cfg.Threshold = cc.Threshold
	}
	if cc.TargetRatio > 0 {
		cfg.TargetRatio = cc.TargetRatio
	}
	cfg.ContextWindows = c.ContextWindows
	keys := []string{c.Primary.APIKey}
	for _, p := range c.FallbackProviders {
		keys = append(keys, p.APIKey)
	}
	cfg.Keys = redaction.New(keys...)
	return cfg
}

// Validate fails fast on settings the compressor cannot work with.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, msg string) {
		if !ok {
			errs = append(errs, errors.New("compressor: "+msg))
		}
	}
	check(c.ProtectFirstN >= 0 && c.ProtectLastN >= 0, "protect_first_n and protect_last_n must not be negative")
	check(c.Threshold > 0 && c.Threshold <= 1, "threshold must be in (0, 1]")
	check(c.FitRatio > 0 && c.FitRatio <= 1, "fit ratio must be in (0, 1]")
	check(c.TargetRatio > 0 && c.TargetRatio < 1, "target_ratio must be in (0, 1)")
	check(c.SummaryTimeout > 0, "summary timeout must be positive")
	check(c.Concurrency > 0, "concurrency must be positive")
	check(c.MinPruneChars >= 0, "minimum prune size must not be negative")
	return errors.Join(errs...)
}
