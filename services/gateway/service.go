package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/pkg/toolset"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Durable is the shared consumer every gateway process pulls LLM requests from.
const Durable = "gateway"

// Service is the provider gateway: it answers LLM requests from the bus.
type Service struct {
	cfg       Config
	nc        *nats.Conn
	js        jetstream.JetStream
	log       zerolog.Logger
	endpoints []endpoint
	clients   []modelClient
	hc        *http.Client
	pricer    Pricer
	inflight  *inflight
	health    *health
	budget    *budgetGuard
	hooks     *hooks.Client
	staleReqs *staleRequests
	histories *histories
	toolSets  *toolset.Store
	counters  counters
	gates     *gates
	stopRenew context.CancelFunc
	// tenants is herald's configuration, read for its tenants' weights
	// and model-call limits.
	tenants config.Config
	// slots are the tenants' model-call limits, shared by every gateway.
	slots *bus.Slots

	mu       sync.Mutex
	worker   *bus.Worker
	webhook  *bus.Worker
	sub      *nats.Subscription
	pauses   *nats.Subscription
	started  bool
	shutdown bool
	// stopPrices ends the watch of imported prices.
	stopPrices context.CancelFunc
}

// New builds the gateway; it fails fast on a configuration it cannot serve.
func New(cfg Config, deps service.Deps) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.NC == nil || deps.JS == nil {
		return nil, errors.New("gateway: a NATS connection and JetStream are required")
	}
	s := &Service{cfg: cfg, tenants: deps.Config, slots: bus.NewSlots(deps.JS), nc: deps.NC, js: deps.JS, log: deps.Log.With().Str("service", "gateway").Logger(),
		pricer: NewPricer(cfg.Pricing), inflight: newInflight(), health: newHealth(cfg.RateLimitCooldown)}
	hc := newHTTPClient(cfg.StreamIdleTimeout, cfg.Concurrency)
	s.hc = hc
	for i, p := range append([]config.Provider{cfg.Primary}, cfg.Fallbacks...) {
		ep, err := newEndpoint(p, i, cfg.Profiles)
		if err != nil {
			return nil, err
		}
		s.endpoints = append(s.endpoints, ep)
		s.clients = append(s.clients, newModelClient(ep, hc))
	}
	budget, err := newBudgetGuard(cfg, deps.JS, s.log)
	if err != nil {
		return nil, err
	}
	s.budget = budget
	s.hooks = hooks.New(deps.NC, hooks.Config{}, s.log)
	s.staleReqs = &staleRequests{records: bus.NewLazyBucket(deps.JS, bus.BucketSessions)}
	s.histories = newHistories(deps.JS)
	s.toolSets = toolset.NewStore(deps.JS)
	s.gates = newGates(deps.JS, cfg.Profiles, cfg.Concurrency, s.log)
	return s, nil
}

// Name is the service's name in logs and in `herald serve`.
func (s *Service) Name() string { return "gateway" }

// Start subscribes to interrupts, then starts taking LLM requests.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.shutdown {
		return fmt.Errorf("gateway: already started or shut down")
	}
	sub, err := s.nc.Subscribe(bus.SessionInterrupt("*"), s.onInterrupt)
	if err != nil {
		return fmt.Errorf("gateway: subscribe to interrupts: %w", err)
	}
	pauses, err := s.gates.listen(s.nc)
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("gateway: subscribe to providers' pauses: %w", err)
	}
	spec := bus.ConsumerSpec{
		Stream:         bus.StreamLLMRequests,
		Durable:        Durable,
		FilterSubjects: []string{bus.LLMRequest(">")},
		Concurrency:    s.cfg.Concurrency,
		Weight:         s.tenants.TenantWeight,
		Waits:          true, // tenants' max_concurrent_model_calls (limit.go)
	}
	pctx, stopPrices := context.WithCancel(context.WithoutCancel(ctx))
	if err := s.pricer.watchPrices(pctx, s.js, s.log); err != nil {
		// a server declared by an older Herald: configured and built-in
		// prices still price every call
		s.log.Error().Err(err).Msg("imported prices not watched: run herald declare")
	}
	w, err := bus.StartWorker(ctx, s.js, spec, s.handle, s.log)
	if err != nil {
		stopPrices()
		_ = sub.Unsubscribe()
		_ = pauses.Unsubscribe()
		return fmt.Errorf("gateway: %w", err)
	}
	hook, err := s.startWebhook(ctx)
	if err != nil {
		stopPrices()
		_ = sub.Unsubscribe()
		_ = pauses.Unsubscribe()
		_ = w.Stop(ctx)
		return fmt.Errorf("gateway: budget webhook: %w", err)
	}
	renewing, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	go s.gates.renew(renewing)
	s.sub, s.worker, s.webhook, s.started, s.stopPrices, s.stopRenew = sub, w, hook, true, stopPrices, stopRenew
	s.pauses = pauses
	s.log.Info().Str("model", s.cfg.Primary.Model).Str("api_mode", s.endpoints[0].mode).
		Int("fallbacks", len(s.cfg.Fallbacks)).Msg("gateway taking LLM requests")
	return nil
}

// Shutdown stops taking requests and waits for calls in flight until ctx
// ends; calls still running then are cancelled and their requests redelivered.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return nil
	}
	s.shutdown = true
	w, sub, hook, stopRenew, pauses := s.worker, s.sub, s.webhook, s.stopRenew, s.pauses
	if s.stopPrices != nil {
		s.stopPrices()
	}
	s.mu.Unlock()
	if stopRenew != nil {
		defer stopRenew()
	}
	var errs []error
	if w != nil {
		errs = append(errs, w.Stop(ctx))
	}
	if hook != nil {
		errs = append(errs, hook.Stop(ctx))
	}
	if sub != nil {
		errs = append(errs, sub.Unsubscribe())
	}
	if pauses != nil {
		errs = append(errs, pauses.Unsubscribe())
	}
	s.hc.CloseIdleConnections()
	return errors.Join(errs...)
}
