package compressor

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/rs/zerolog"
)

// Durable is the compressor's shared consumer on COMPRESS.
const Durable = "compressor"

// Service is the compressor service.
type Service struct {
	cfg  Config
	deps service.Deps
	log  zerolog.Logger
	comp *compressor

	mu      sync.Mutex
	worker  *bus.Worker
	stopped bool
}

// New checks cfg and prepares the service; nothing runs until Start.
func New(cfg Config, deps service.Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.NC == nil || deps.JS == nil {
		return nil, errors.New("compressor: a NATS connection and JetStream are required")
	}
	s := &Service{cfg: cfg, deps: deps, log: deps.Log.With().Str("service", "compressor").Logger()}
	s.comp = &compressor{cfg: cfg, summarize: s.summarizeWithModel}
	return s, nil
}

// Name implements service.Service.
func (s *Service) Name() string { return "compressor" }

// Start takes compression requests.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, err := bus.StartWorker(ctx, s.deps.JS, bus.ConsumerSpec{
		Stream: bus.StreamCompress, Durable: Durable, FilterSubjects: []string{"herald.compress.request.>"},
		Concurrency: s.cfg.Concurrency, AckWait: s.cfg.SummaryTimeout + s.cfg.SummaryTimeout/2,
		Weight: s.deps.Config.TenantWeight,
	}, s.handle, s.log)
	if err != nil {
		return fmt.Errorf("compressor: %w", err)
	}
	s.worker = w
	s.log.Info().Msg("compressor started")
	return nil
}

// Shutdown stops taking requests and lets in-flight ones finish until ctx
// ends. Safe twice and without Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	return s.worker.Stop(ctx)
}
