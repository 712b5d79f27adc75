package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/pkg/toolset"
	"github.com/rs/zerolog"
)

// Service is the loop service.
type Service struct {
	cfg   Config
	deps  service.Deps
	log   zerolog.Logger
	store sessionStore
	tr    *transcripts
	hooks *hooks.Client

	mu      sync.Mutex
	workers []*bus.Worker
	// toolCache holds wire-form tool lists by their names (see wireTools).
	toolCache sync.Map
	// toolLists holds the tools offered to each kind of session (toolList).
	toolListsMu sync.Mutex
	toolLists   map[toolListKey]*toolList
	// toolSets stores the tool lists requests refer to by digest.
	toolSets *toolset.Store
	// inlineTools warns once when tool lists travel in the requests.
	inlineTools sync.Once
	// commits wakes early inputs at their session's next commit.
	commits commitSignals
	// remote are the tools runners announce beyond the built-in ones.
	remote *remoteTools
	// slots are the tenants' session limits, shared by every process.
	slots *bus.Slots
	// poolWatches are the tool calls waiting for their pool's warning
	// (poolwatch.go): *poolWatch by session and call.
	poolWatches sync.Map
}

// New validates cfg and returns a loop service ready to Start.
func New(cfg Config, deps service.Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.JS == nil || deps.NC == nil {
		return nil, errors.New("loop: a NATS connection and JetStream are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, deps: deps, log: deps.Log.With().Str("service", "loop").Logger(),
		tr: newTranscripts(deps.JS), slots: bus.NewSlots(deps.JS), toolSets: toolset.NewStore(deps.JS), hooks: hooks.New(deps.NC, cfg.Hooks, deps.Log.With().Str("service", "loop").Logger())}, nil
}

// Name is the service's name.
func (s *Service) Name() string { return "loop" }

// Start binds the loop's consumers and begins advancing sessions.
func (s *Service) Start(ctx context.Context) error {
	kv, err := s.deps.JS.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return fmt.Errorf("loop: session bucket: %w", err)
	}
	s.store = sessionStore{kv: kv}
	// Learn the runners' extra (MCP) tools before the first session; a
	// missing runner only means none are known yet.
	s.remote = &remoteTools{nc: s.deps.NC, log: s.log, timeout: 500 * time.Millisecond, ttl: 30 * time.Second, refreshing: true}
	s.remote.refresh()
	busyDelays := []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	// Answers that overtook their session's commit, or lost a CAS race,
	// come back quickly and often before they are given up on.
	raceDelays := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}
	specs := []struct {
		spec bus.ConsumerSpec
		h    bus.Handler
	}{
		{bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: bus.LoopTasksConsumer, FilterSubjects: slices.Clone(bus.TaskSubjects),
			MaxDeliver: 2000, RetryDelays: busyDelays, Waits: true,
			// a tenant's tasks behind more than the window of another's
			// are read past it (pkg/bus/peek.go), and so are its subtasks:
			// a parent's turn waits for its child
			PeekSubjects: []string{bus.TenantTasksFilter, bus.TenantAPITasksFilter, bus.TenantSubtasksFilter},
			PeekShared:   []string{bus.TasksSubject, bus.APITasksSubject, bus.SubtasksSubject}}, s.handleTask},
		{bus.ConsumerSpec{Stream: bus.StreamLLMResponses, Durable: "loop-llm",
			FilterSubjects: []string{bus.LLMResponseFilter(bus.OwnerLoop)}, MaxDeliver: 50, RetryDelays: raceDelays}, s.handleModelResponse},
		{bus.ConsumerSpec{Stream: bus.StreamToolResults, Durable: "loop-tools",
			FilterSubjects: []string{"herald.tool.result.>"}, MaxDeliver: 50, RetryDelays: raceDelays}, s.handleToolResult},
		{bus.ConsumerSpec{Stream: bus.StreamCompressResults, Durable: "loop-compress",
			FilterSubjects: []string{"herald.compress.result.>"}, MaxDeliver: 50, RetryDelays: raceDelays}, s.handleCompressResult},
		{bus.ConsumerSpec{Stream: bus.StreamControl, Durable: "loop-control",
			FilterSubjects: bus.InterruptFilters, DeliverNew: true}, s.handleInterrupt},
	}
	for _, sp := range specs {
		sp.spec.Concurrency = s.cfg.Concurrency
		sp.spec.Lookahead = lookahead
		sp.spec.Weight = s.deps.Config.TenantWeight
		w, err := bus.StartWorker(ctx, s.deps.JS, sp.spec, sp.h, s.log)
		if err != nil {
			_ = s.Shutdown(ctx)
			return fmt.Errorf("loop: %w", err)
		}
		s.mu.Lock()
		s.workers = append(s.workers, w)
		s.mu.Unlock()
	}
	s.log.Info().Msg("loop started")
	return nil
}

// Shutdown stops taking messages and waits for in-flight transitions.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	workers := s.workers
	s.workers = nil
	s.mu.Unlock()
	var errs []error
	for _, w := range workers {
		errs = append(errs, w.Stop(ctx))
	}
	return errors.Join(errs...)
}
