package accounting

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// storeBatch decodes a batch, dead-letters what cannot be decoded and stores the
// rest, keeping b.msgs to what is left to ack. Until ClickHouse has the rows
// nothing is acked, so a crash at any point leaves them in the stream. It
// reports whether the batch is ready to ack.
func (s *sink) storeBatch(stopping, work context.Context, b fetched) (fetched, bool) {
	rows, kept := s.decode(work, b.msgs)
	b.msgs = kept
	if len(kept) == 0 {
		b.stopKeepAlive()
		return b, false
	}
	if err := s.storeWithRetry(stopping, work, rows); err != nil {
		// Shutting down while ClickHouse is away: hand the events back now.
		b.stopKeepAlive()
		for _, m := range kept {
			_ = m.Nak()
		}
		// Naks are fire-and-forget; make sure they leave before we stop.
		_ = s.js.Conn().Flush()
		return b, false
	}
	if s.cfg.afterInsert != nil {
		s.cfg.afterInsert(s.kind.stream, len(rows))
	}
	return b, true
}

// decode turns messages into rows, dead-lettering the ones that cannot be.
func (s *sink) decode(ctx context.Context, msgs []jetstream.Msg) ([]row, []jetstream.Msg) {
	rows := make([]row, 0, len(msgs))
	kept := msgs[:0:0]
	for _, m := range msgs {
		// An event too large for one message travels by claim-check.
		data, err := bus.Resolve(ctx, s.js, m.Subject(), m.Headers(), m.Data())
		var r row
		if err == nil {
			r, err = s.kind.decode(data)
		}
		if err != nil {
			s.log.Warn().Err(err).Str("subject", m.Subject()).Msg("event dead-lettered")
			if dlErr := bus.DeadLetter(ctx, s.js, m, err.Error()); dlErr != nil {
				s.log.Error().Err(dlErr).Msg("dead-lettering failed; event will be redelivered")
				_ = m.NakWithDelay(s.cfg.RetryMin)
			}
			continue
		}
		rows = append(rows, r)
		kept = append(kept, m)
	}
	return rows, kept
}

// storeWithRetry inserts until ClickHouse takes the rows or the sink stops.
func (s *sink) storeWithRetry(stopping, work context.Context, rows []row) error {
	delay := s.cfg.RetryMin
	for {
		var n int
		err := s.lease.hold(work, func(ctx context.Context) (err error) {
			n, err = s.store.insertNew(ctx, s.kind, rows)
			return err
		})
		if err == nil {
			s.recovered(n)
			return nil
		}
		if stopping.Err() != nil || work.Err() != nil {
			return errors.Join(err, context.Canceled)
		}
		s.failed(err, s.store.addr, len(rows))
		if !sleep(stopping, delay) {
			return errors.Join(err, context.Canceled)
		}
		delay = min(2*delay, s.cfg.RetryMax)
	}
}

// outage logs the start and end of a ClickHouse outage once each, never per
// message or per retry.
type outage struct {
	log   zerolog.Logger
	mu    sync.Mutex
	since time.Time
	tries int
}

func (o *outage) failed(err error, addr string, pending int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tries++
	if o.since.IsZero() {
		o.since = time.Now()
		o.log.Warn().Err(err).Str("clickhouse", addr).Int("pending", pending).
			Msg("ClickHouse is not taking events; they wait in the stream and are retried with backoff")
	}
}

func (o *outage) recovered(stored int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.since.IsZero() {
		o.log.Info().Dur("down_for", time.Since(o.since)).Int("retries", o.tries).Int("stored", stored).
			Msg("ClickHouse is taking events again; catching up")
		o.since, o.tries = time.Time{}, 0
	}
}
