package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Service is one tool runner process's share of the work.
type Service struct {
	cfg     Config
	deps    service.Deps
	log     zerolog.Logger
	runner  string
	tools   map[string]tool
	limits  *toolLimits
	secrets secrets
	sandbox *Sandbox
	hooks   *hooks.Client
	usage   workspaceUsage

	mu      sync.Mutex
	started bool
	worker  *bus.Worker
	// reads takes the pool's quick reads (bus.ToolRead) beside worker.
	reads   *bus.Worker
	state   jetstream.KeyValue
	mcp     *mcpHub
	specSub *nats.Subscription
	// ctxSub answers the loop's context-file requests (contextfiles.go).
	ctxSub *nats.Subscription
	// pingSub answers herald status's count of runners (specs.go).
	pingSub *nats.Subscription
}

// New checks cfg and prepares a runner; Start makes it take work.
func New(cfg Config, deps service.Deps) (*Service, error) {
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.NC == nil || deps.JS == nil {
		return nil, errors.New("toolrunner: a NATS connection and JetStream are required")
	}
	runner := deps.Instance
	if runner == "" {
		host, _ := os.Hostname()
		runner = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	s := &Service{cfg: cfg, deps: deps, runner: runner,
		log:    deps.Log.With().Str("service", "toolrunner").Str("runner", runner).Logger(),
		limits: newToolLimits(cfg.ToolConcurrency), secrets: secretsOf(deps.Config)}
	sb, err := NewSandbox(cfg.Sandbox.ForPool(cfg.Pool), s.log)
	if err != nil {
		return nil, fmt.Errorf("toolrunner: %w", err)
	}
	sb.workspaceRoot, sb.dataDir = cfg.WorkspaceRoot, cfg.DataDir
	s.sandbox = sb
	s.hooks = hooks.New(deps.NC, cfg.Hooks, s.log)
	s.tools = s.builtinTools()
	return s, nil
}

// Name is the service's name in the herald binary.
func (s *Service) Name() string { return "toolrunner" }

// Start opens the runner's state, starts the MCP servers, then takes calls.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("toolrunner: already started")
	}
	kv, err := s.deps.JS.KeyValue(ctx, BucketState)
	if err != nil {
		return fmt.Errorf("toolrunner: state bucket: %w", err)
	}
	s.state = kv
	if err := s.startMCP(ctx); err != nil {
		return err
	}
	if s.specSub, err = s.serveSpecs(); err != nil {
		s.stopMCP()
		return err
	}
	if s.ctxSub, err = s.serveContextFiles(); err != nil {
		_ = s.specSub.Unsubscribe()
		s.stopMCP()
		return err
	}
	s.worker, err = bus.StartWorker(ctx, s.deps.JS, bus.ConsumerSpec{
		Stream:         bus.StreamToolCalls,
		Durable:        bus.ToolRunnerConsumer(s.cfg.Pool),
		FilterSubjects: []string{bus.ToolRunnerFilter(s.cfg.Pool)},
		Concurrency:    s.cfg.Concurrency,
		MaxDeliver:     s.cfg.MaxDeliver,
		AckWait:        s.cfg.AckWait,
		Weight:         s.deps.Config.TenantWeight,
		// A runner's few handlers take seconds a call: a deep window would
		// hold calls other runners (scaled out on the backlog) could run,
		// and a runner that dies would delay them all by AckWait and spend
		// one of their deliveries. One window's worth of its handlers.
		Lookahead: s.cfg.Concurrency,
	}, s.handle, s.log)
	if err == nil {
		// after the calls consumer: one of an older runner took every call
		// of the pool, reads included, and the two may not overlap
		s.reads, err = bus.StartWorker(ctx, s.deps.JS, bus.ConsumerSpec{
			Stream:         bus.StreamToolCalls,
			Durable:        bus.ToolReadsConsumer(s.cfg.Pool),
			FilterSubjects: []string{bus.ToolReadFilter(s.cfg.Pool)},
			Concurrency:    s.cfg.ReadConcurrency,
			MaxDeliver:     s.cfg.MaxDeliver,
			AckWait:        s.cfg.AckWait,
			Weight:         s.deps.Config.TenantWeight,
			// reads take milliseconds: a window as deep as its handlers
			Lookahead: s.cfg.ReadConcurrency,
		}, s.handle, s.log)
		if err != nil {
			_ = s.worker.Stop(ctx)
		}
	}
	if err != nil {
		_ = s.specSub.Unsubscribe()
		_ = s.ctxSub.Unsubscribe()
		s.stopMCP()
		return fmt.Errorf("toolrunner: %w", err)
	}
	if s.pingSub, err = s.servePing(); err != nil {
		s.log.Warn().Err(err).Msg("not answering runner pings: herald status will not count this runner")
	}
	s.started = true
	s.log.Info().Str("pool", s.cfg.Pool).Int("concurrency", s.cfg.Concurrency).Int("read_concurrency", s.cfg.ReadConcurrency).
		Int("tools", len(s.tools)).Msg("tool runner started")
	return nil
}

// Shutdown stops taking calls and waits for those in flight until ctx ends;
// calls still running then are stopped and reported as interrupted.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	if s.specSub != nil {
		_ = s.specSub.Unsubscribe()
	}
	if s.ctxSub != nil {
		_ = s.ctxSub.Unsubscribe()
	}
	if s.pingSub != nil {
		_ = s.pingSub.Unsubscribe()
	}
	err := errors.Join(s.reads.Stop(ctx), s.worker.Stop(ctx))
	s.stopMCP()
	s.sandbox.close()
	s.log.Info().Msg("tool runner stopped")
	return err
}
