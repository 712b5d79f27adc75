package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
)

// watchPool warns the session, once PoolWarningAfter has passed, when its
// tool call still waits on subject and no tool runner of pool takes calls:
// a task naming a pool nobody serves would otherwise wait in silence.
func (s *Service) watchPool(pool, subject string, ev proto.Event) {
	if s.cfg.PoolWarningAfter <= 0 {
		return
	}
	time.AfterFunc(s.cfg.PoolWarningAfter, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if !s.nobodyServes(ctx, pool, subject) {
			return
		}
		ev.Type = proto.EventWarning
		ev.Message = fmt.Sprintf("no tool runner takes calls for pool %q: %s waits (start one: herald serve toolrunner --pool %s)",
			pool, ev.Tool, pool)
		if err := bus.PublishEvent(s.deps.NC, ev); err != nil {
			s.log.Warn().Err(err).Str("session_id", ev.SessionID).Msg("publishing the pool warning failed")
		}
		s.log.Warn().Str("session_id", ev.SessionID).Str("pool", pool).Str("tool", ev.Tool).Msg("no tool runner takes calls for this pool")
	})
}

// nobodyServes reports whether the call on subject still waits and no
// runner of pool pulls calls or works on one.
func (s *Service) nobodyServes(ctx context.Context, pool, subject string) bool {
	stream, err := s.deps.JS.Stream(ctx, bus.StreamToolCalls)
	if err != nil {
		return false
	}
	if _, err := stream.GetLastMsgForSubject(ctx, subject); err != nil {
		return false // taken and done (or unreadable: say nothing)
	}
	ci, err := stream.Consumer(ctx, "toolrunner-"+pool)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return true
	}
	if err != nil {
		return false
	}
	info, err := ci.Info(ctx)
	return err == nil && info.NumWaiting == 0 && info.NumAckPending == 0
}

func orDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
