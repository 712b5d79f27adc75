package accounting

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// sink drains one stream into one table: fetch a batch, dead-letter what
// cannot be decoded, store the rest once, then ack.
type sink struct {
	kind  eventKind
	cfg   Config
	js    jetstream.JetStream
	cons  jetstream.Consumer
	store *store
	lease *lease
	log   zerolog.Logger
	outage
}

func newSink(ctx context.Context, k eventKind, cfg Config, js jetstream.JetStream, st *store, log zerolog.Logger) (*sink, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, k.stream, jetstream.ConsumerConfig{
		Durable:       k.durable,
		FilterSubject: k.filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		// ClickHouse being down is no reason to give up on an event; poison
		// messages are dead-lettered by the sink itself.
		MaxDeliver:    -1,
		MaxAckPending: 4 * cfg.BatchSize,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", k.durable, k.stream, err)
	}
	ls, err := newLease(ctx, js, k.stream)
	if err != nil {
		return nil, err
	}
	log = log.With().Str("stream", k.stream).Str("consumer", k.durable).Logger()
	return &sink{kind: k, cfg: cfg, js: js, cons: cons, store: st, lease: ls, log: log, outage: outage{log: log}}, nil
}

// fetched is a batch on its way through the sink, kept alive (in progress)
// from the moment it is fetched until it is acked or handed back.
type fetched struct {
	msgs          []jetstream.Msg
	stopKeepAlive func()
}

// run fetches, stores and acks batches until stopping ends, in three
// overlapping stages (the next batch is fetched while one is stored and the
// previous one acked); a batch in hand is finished with work, which ends only
// when shutdown runs out of time.
func (s *sink) run(stopping, work context.Context) {
	defer bus.KeepAnchor(s.js, s.kind.stream, s.log)()
	batches := make(chan fetched, 1)
	acks := make(chan fetched, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.fetchLoop(stopping, batches) }()
	go func() { defer wg.Done(); s.ackLoop(acks) }()
	for b := range batches {
		if b, ok := s.storeBatch(stopping, work, b); ok {
			acks <- b
		}
	}
	close(acks)
	wg.Wait()
}

func (s *sink) fetchLoop(stopping context.Context, out chan<- fetched) {
	defer close(out)
	for stopping.Err() == nil {
		msgs, err := s.fetch()
		if err != nil {
			if stopping.Err() == nil {
				s.log.Warn().Err(err).Msg("fetching events failed; retrying")
				sleep(stopping, s.cfg.RetryMin)
			}
			continue
		}
		if len(msgs) > 0 {
			out <- fetched{msgs: msgs, stopKeepAlive: keepAlive(msgs, s.cfg.AckWait/3)}
		}
	}
}

// ackLoop acks batches ClickHouse holds. An ack that is lost only means the
// batch comes back and is found already stored.
func (s *sink) ackLoop(in <-chan fetched) {
	for b := range in {
		b.stopKeepAlive()
		for _, m := range b.msgs {
			if err := m.Ack(); err != nil {
				s.log.Warn().Err(err).Msg("ack failed; the batch will be redelivered and skipped as already stored")
				break
			}
		}
		_ = s.js.Conn().Flush()
	}
}

// fetch returns up to BatchSize messages, waiting at most FlushInterval.
func (s *sink) fetch() ([]jetstream.Msg, error) {
	batch, err := s.cons.Fetch(s.cfg.BatchSize, jetstream.FetchMaxWait(s.cfg.FlushInterval))
	if err != nil {
		return nil, err
	}
	msgs := make([]jetstream.Msg, 0, 64)
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && len(msgs) == 0 {
		return nil, err
	}
	return msgs, nil
}

// keepAlive marks msgs in progress every interval until stopped, so a slow or
// absent ClickHouse does not get them redelivered to another sink.
func keepAlive(msgs []jetstream.Msg, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range msgs {
					_ = m.InProgress()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
