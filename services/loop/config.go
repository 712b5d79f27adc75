package loop

import (
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/hooks"
)

// Config is the loop's configuration.
type Config struct {
	Model         string
	Tenant        string
	MaxIterations int
	// ChildMaxIterations caps a delegated child session's budget.
	ChildMaxIterations    int
	MaxConcurrentChildren int
	RepeatThreshold       int
	ContextWindows        map[string]int
	Compression           config.Compression
	// ContextFilesTimeout bounds the wait for a tool runner's answer with
	// the session's context files (AGENTS.md, ...) at session start; the
	// session starts without them, and says so, when none answers.
	ContextFilesTimeout time.Duration
	// Concurrency caps the messages of each kind handled at once. Handling
	// one is a few round trips on the bus and a little CPU, never a model's
	// wait (the gateway waits for the model), so a few dozen at once keep
	// the processors busy. More only moves the queue from the worker's
	// window, which serves tenants by weight, into the Go scheduler's, which
	// serves goroutines first come, first served: with 1,024, a tenant's
	// task published behind another's 1,000 started 0.3–1.0 s later, with
	// 64 within 30–90 ms; the flood's own total stayed within the noise
	// (docs/BENCHMARKS.md, "Fair share between tenants").
	Concurrency int
	// SnapshotTimeout bounds the wait for the memory snapshot at session start.
	SnapshotTimeout time.Duration
	// PressureCooldown spaces context-pressure events of one session.
	PressureCooldown time.Duration
	Pool             string
	// PoolWarningAfter is how long a tool call waits for a runner of its
	// pool before the session is warned that none takes calls.
	PoolWarningAfter time.Duration
	// Fallbacks is how many fallback providers the gateway may turn to;
	// with none, asking for the fallback would only ask the primary again.
	Fallbacks int
	// Hooks is how pre_llm_call is asked.
	Hooks hooks.Config
	// Now is the clock the cooldowns are measured by (nil: time.Now); tests
	// move it forward instead of waiting.
	Now func() time.Time
}

// DefaultConcurrency is the messages of each kind a loop process handles at
// once unless told otherwise (Config.Concurrency).
const DefaultConcurrency = 64

// lookahead is the window of pending messages each of the loop's workers
// shares by tenant, whatever its concurrency (bus.ConsumerSpec.Lookahead):
// a tenant's task is seen past another's backlog of up to this many.
const lookahead = 1024

// ConfigFrom derives the loop's configuration from the global one.
func ConfigFrom(c config.Config) Config {
	return Config{
		Model:                 c.Primary.Model,
		Tenant:                c.Tenant,
		MaxIterations:         c.Agent.MaxTurns,
		ChildMaxIterations:    c.Delegation.MaxIterations,
		MaxConcurrentChildren: c.Delegation.MaxConcurrentChildren,
		RepeatThreshold:       c.Agent.RepeatThreshold,
		ContextWindows:        c.ContextWindows,
		Compression:           c.Compression,
		ContextFilesTimeout:   2 * time.Second,
		Concurrency:           DefaultConcurrency,
		SnapshotTimeout:       2 * time.Second,
		PressureCooldown:      300 * time.Second,
		Pool:                  bus.DefaultPool,
		PoolWarningAfter:      orDuration(c.Tools.PoolWarningAfter, 10*time.Second),
		Fallbacks:             len(c.FallbackProviders),
		Hooks:                 hooks.ConfigFrom(c),
		Now:                   time.Now,
	}
}

// Validate fails fast on a configuration the loop cannot run with.
func (c Config) Validate() error {
	var errs []error
	if c.MaxIterations <= 0 {
		errs = append(errs, fmt.Errorf("loop: max iterations must be positive, got %d", c.MaxIterations))
	}
	if c.ChildMaxIterations <= 0 {
		errs = append(errs, errors.New("loop: delegation max iterations must be positive"))
	}
	if c.RepeatThreshold < 2 {
		errs = append(errs, fmt.Errorf("loop: repeat threshold must be at least 2, got %d", c.RepeatThreshold))
	}
	if c.Concurrency <= 0 {
		errs = append(errs, errors.New("loop: concurrency must be positive"))
	}
	return errors.Join(errs...)
}
