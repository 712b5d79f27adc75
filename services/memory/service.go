package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Core request subjects this service answers besides bus.MemorySnapshotSubject.
const (
	// SearchSubject answers session searches for people (herald sessions search).
	SearchSubject = "herald.memory.search"
	// RecallSubject answers per-turn recall from the external provider, fenced.
	RecallSubject = "herald.memory.recall"
)

// Service is the memory service.
type Service struct {
	cfg  Config
	deps service.Deps
	log  zerolog.Logger

	store    *Store
	index    *Index
	provider Provider
	hooks    *hooks.Client

	mu      sync.Mutex
	worker  *bus.Worker
	subs    []*nats.Subscription
	indexer *indexer
	stopped bool
}

// New checks cfg and prepares the service; nothing runs until Start.
func New(cfg Config, deps service.Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.NC == nil || deps.JS == nil {
		return nil, errors.New("memory: a NATS connection and JetStream are required")
	}
	log := deps.Log.With().Str("service", "memory").Logger()
	return &Service{cfg: cfg, deps: deps, index: NewIndex(), log: log,
		hooks: hooks.New(deps.NC, hooks.ConfigFrom(deps.Config), log)}, nil
}

// SetProvider installs the one optional external memory provider; call it
// before Start.
func (s *Service) SetProvider(p Provider) { s.provider = p }

// Name implements service.Service.
func (s *Service) Name() string { return "memory" }

// Start binds the memory stores, starts indexing transcripts, answers
// snapshot, search and recall requests and takes tool calls.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv, err := s.deps.JS.KeyValue(ctx, bus.BucketMemory)
	if err != nil {
		return fmt.Errorf("memory: bucket %s: %w", bus.BucketMemory, err)
	}
	s.store = &Store{kv: kv}
	if s.indexer, err = startIndexer(ctx, s.deps.JS, s.index, s.cfg, s.log); err != nil {
		return err
	}
	for subject, h := range map[string]nats.MsgHandler{
		bus.MemorySnapshotSubject: s.serveSnapshot, SearchSubject: s.serveSearch, RecallSubject: s.serveRecall,
	} {
		sub, err := s.deps.NC.QueueSubscribe(subject, queueGroup, concurrently(h))
		if err != nil {
			return fmt.Errorf("memory: subscribe %s: %w", subject, err)
		}
		s.subs = append(s.subs, sub)
	}
	s.worker, err = bus.StartWorker(ctx, s.deps.JS, bus.ConsumerSpec{
		Stream: bus.StreamToolCalls, Durable: "memory", FilterSubjects: []string{"herald.memory.call.>"},
		Concurrency: s.cfg.Concurrency, Weight: s.deps.Config.TenantWeight,
	}, s.handleCall, s.log)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	s.log.Info().Msg("memory service started")
	return nil
}

// maxAnswering bounds the core requests of one kind answered at once.
const maxAnswering = 64

// concurrently answers each request of h's subject in its own goroutine, at
// most maxAnswering at once. A subscription hands its messages to one
// goroutine in turn, so one slow answer (an external provider's recall, a
// search waiting for the index) held up every request behind it: with 1,000
// sessions starting at once, some snapshots waited past the loop's 2 s and
// those sessions started without their memory. An answer still running at
// Shutdown finishes on its own (each is bounded by snapshotTimeout).
func concurrently(h nats.MsgHandler) nats.MsgHandler {
	slots := make(chan struct{}, maxAnswering)
	return func(m *nats.Msg) {
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			h(m)
		}()
	}
}

// Shutdown stops taking calls and requests, lets in-flight calls finish
// until ctx ends and saves the search index. Safe twice and without Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	var errs []error
	for _, sub := range s.subs {
		errs = append(errs, sub.Drain())
	}
	errs = append(errs, s.worker.Stop(ctx))
	if s.indexer != nil {
		errs = append(errs, s.indexer.stop())
	}
	return errors.Join(errs...)
}
