package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Name is the service's name in `herald serve`.
const Name = "api"

// sweepEvery is how often held slots are checked against durable results,
// covering a result whose core message this process missed.
const sweepEvery = 2 * time.Second

// Bounds of a connection the service serves itself (herald up serves the
// api on the dashboard's server, with its own): its request headers, and
// how long it may stay open between requests. A body's bound is
// Config.BodyTimeout (readBody), set around the read alone, so that an
// event stream's connection stays open.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// Service is the api service.
type Service struct {
	cfg  Config
	deps service.Deps
	log  zerolog.Logger
	mux  *http.ServeMux
	adm  *admission

	keys jetstream.KeyValue
	runs *store

	mu      sync.Mutex
	started bool
	bg      context.Context // ends at Shutdown
	stop    context.CancelFunc
	wg      sync.WaitGroup
	sub     *nats.Subscription
	fires   jetstream.ConsumeContext
	srv     *http.Server
	addr    string
}

// New builds the service; Start connects it to the bus.
func New(cfg Config, deps service.Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, deps: deps, log: deps.Log.With().Str("service", Name).Logger(),
		adm: newAdmission(cfg.OverLimit == config.OverLimitReject, cfg.TenantRuns, cfg.maxQueuedRuns(), bus.NewSlots(deps.JS))}
	s.adm.moved = s.announcePositions
	s.routes()
	return s, nil
}

func (s *Service) Name() string { return Name }

// Handler serves the API's routes (herald up mounts it on the dashboard's
// address).
func (s *Service) Handler() http.Handler { return s.mux }

// Addr is the address Start listens on ("" when it does not).
func (s *Service) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Start opens the buckets, follows results to free admission slots and,
// with Config.Listen, serves HTTP.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	js := s.deps.JS
	keys, err := js.KeyValue(ctx, bus.BucketAPIKeys)
	if err != nil {
		return fmt.Errorf("keys bucket: %w", err)
	}
	runs, err := js.KeyValue(ctx, bus.BucketAPIRuns)
	if err != nil {
		return fmt.Errorf("runs bucket: %w", err)
	}
	s.keys, s.runs = keys, &store{kv: runs, js: js}
	if s.sub, err = s.deps.NC.Subscribe("herald.session.*.result", s.onResult); err != nil {
		return fmt.Errorf("follow results: %w", err)
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.bg, s.stop = bg, cancel
	s.wg.Add(1)
	go s.sweep(bg)
	s.adm.start(bg)
	if s.cfg.Listen != "" {
		if err := s.listen(); err != nil {
			cancel()
			_ = s.sub.Unsubscribe()
			return err
		}
	}
	if s.fires, err = s.followFires(ctx); err != nil {
		cancel()
		_ = s.sub.Unsubscribe()
		return err
	}
	s.started = true
	s.requeue(bg)
	return nil
}

func (s *Service) listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.addr = ln.Addr().String()
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
	go func() { _ = s.srv.Serve(ln) }()
	s.log.Info().Str("address", "http://"+s.addr).Msg("api serving")
	return nil
}

// Shutdown stops serving and following results. Safe to call twice or
// without Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	s.started = false
	var err error
	if s.srv != nil {
		err = s.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = s.srv.Close()
		}
	}
	_ = s.sub.Unsubscribe()
	s.fires.Stop()
	s.stop()
	s.wg.Wait()
	return err
}

// onResult frees the slot of the run whose result this is.
func (s *Service) onResult(m *nats.Msg) {
	data := m.Data
	if m.Header.Get(bus.HeaderClaim) != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if data, err = bus.Resolve(ctx, s.deps.JS, m.Subject, m.Header, m.Data); err != nil {
			return // the sweep finds it
		}
	}
	var res proto.Result
	if json.Unmarshal(data, &res) == nil && res.TaskID != "" {
		s.adm.release(res.TaskID)
	}
}

// sweep frees the slots of runs whose durable result exists.
func (s *Service) sweep(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range s.adm.activeRuns() {
			r, err := s.runs.get(ctx, principal{}, id)
			var gone *apiError
			if errors.As(err, &gone) && gone.status == http.StatusNotFound {
				s.adm.release(id)
			}
			if err != nil {
				continue
			}
			if res, err := s.runs.result(ctx, r); err == nil && res != nil {
				s.adm.release(id)
			}
		}
	}
}
