package accounting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/service"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Service is the accounting service: the ClickHouse sink and the dashboard.
type Service struct {
	cfg Config
	js  jetstream.JetStream
	log zerolog.Logger

	mu       sync.Mutex
	started  bool
	stopping context.CancelFunc // stops fetching
	abort    context.CancelFunc // cancels in-flight inserts
	wg       sync.WaitGroup
	store    *store

	dashboard *Dashboard
}

// New validates cfg (zero fields take their defaults) and builds the service.
func New(cfg Config, deps service.Deps) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("accounting config: %w", err)
	}
	if deps.JS == nil {
		return nil, errors.New("accounting: no JetStream in deps")
	}
	return &Service{cfg: cfg, js: deps.JS, log: deps.Log.With().Str("service", "accounting").Logger()}, nil
}

// Name is "accounting".
func (s *Service) Name() string { return "accounting" }

// Start declares the consumers and starts draining them into ClickHouse. It
// applies pending migrations first. With no DSN it consumes nothing; with
// ClickHouse unreachable it returns and keeps trying in the background.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("accounting: already started")
	}
	stopping, stop := context.WithCancel(context.WithoutCancel(ctx))
	work, abort := context.WithCancel(context.WithoutCancel(ctx))
	s.stopping, s.abort, s.started = stop, abort, true
	for _, k := range []eventKind{usageKind, toolKind} {
		s.goRun(func() { watchFill(stopping, s.js, k.stream, s.cfg.StreamCheckInterval, s.log) })
	}
	if s.cfg.DSN == "" {
		s.log.Warn().Msg("no ClickHouse configured (HERALD_CLICKHOUSE_DSN): usage and tool events wait durably in their streams")
		return nil
	}
	st, err := s.connect(ctx)
	var unreachable *UnreachableError
	switch {
	case errors.As(err, &unreachable):
		s.log.Warn().Err(err).Msg("ClickHouse is not reachable; events wait in their streams until it is")
		s.goRun(func() { s.connectLater(stopping, work) })
		return nil
	case err != nil:
		stop()
		abort()
		return err
	}
	return s.startSinks(ctx, stopping, work, st)
}

// connect opens ClickHouse and applies migrations, within a few seconds.
func (s *Service) connect(ctx context.Context) (*store, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := openStore(ctx, s.cfg.DSN)
	if err != nil {
		return nil, err
	}
	applied, err := st.migrate(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("accounting migrations: %w", err)
	}
	if len(applied) > 0 {
		s.log.Info().Ints("versions", applied).Str("database", st.database).Msg("ClickHouse schema migrated")
	}
	return st, nil
}

// connectLater retries connect with backoff, then starts the sinks.
func (s *Service) connectLater(stopping, work context.Context) {
	delay := s.cfg.RetryMin
	for sleep(stopping, delay) {
		st, err := s.connect(stopping)
		if err == nil {
			s.log.Info().Str("clickhouse", st.addr).Msg("ClickHouse is reachable; draining waiting events")
			s.mu.Lock()
			defer s.mu.Unlock()
			if err := s.startSinks(stopping, stopping, work, st); err != nil {
				s.log.Error().Err(err).Msg("starting the sinks failed")
			}
			return
		}
		delay = min(2*delay, s.cfg.RetryMax)
	}
}

// startSinks creates the consumers and runs one sink per stream. Callers
// hold s.mu.
func (s *Service) startSinks(ctx, stopping, work context.Context, st *store) error {
	s.store = st
	for _, k := range []eventKind{usageKind, toolKind} {
		sk, err := newSink(ctx, k, s.cfg, s.js, st, s.log)
		if err != nil {
			return err
		}
		s.goRun(func() { sk.run(stopping, work) })
	}
	return nil
}

func (s *Service) goRun(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Shutdown stops fetching, lets the batches in hand be stored and acked
// until ctx ends (then hands them back to the stream), and closes
// ClickHouse. Safe twice and without Start.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	stop, abort := s.stopping, s.abort
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		abort()
		<-done
		err = ctx.Err()
	}
	abort()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store != nil {
		s.store.Close()
		s.store = nil
	}
	if s.dashboard != nil {
		s.dashboard.Close()
	}
	return err
}
