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
// a task naming a pool nobody serves would otherwise wait in silence. The
// watch ends when this process handles the call's result (answered: no
// stream or consumer to ask); a result handled by another loop process
// leaves it to look, and find the call gone.
func (s *Service) watchPool(pool, subject string, ev proto.Event) {
	if s.cfg.PoolWarningAfter <= 0 {
		return
	}
	key, watch := poolWatchKey(ev.SessionID, ev.CallID), &poolWatch{}
	watch.timer = time.AfterFunc(s.cfg.PoolWarningAfter, func() {
		s.poolWatches.CompareAndDelete(key, watch) // a later dispatch's watch stays
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
	// a call dispatched again (its step retried) is watched once
	if old, loaded := s.poolWatches.Swap(key, watch); loaded {
		old.(*poolWatch).timer.Stop()
	}
}

// poolWatch is one dispatch's watch of a call.
type poolWatch struct{ timer *time.Timer }

// answered ends the pool watch of a call whose result arrived. Before,
// every call's watch asked TOOL_CALLS for its stream and last message ten
// seconds later, answered or not: two API requests per tool call.
func (s *Service) answered(sessionID, callID string) {
	if w, ok := s.poolWatches.LoadAndDelete(poolWatchKey(sessionID, callID)); ok {
		w.(*poolWatch).timer.Stop()
	}
}

func poolWatchKey(sessionID, callID string) string { return sessionID + "\x00" + callID }

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
	// every runner of the pool takes its calls and its reads
	ci, err := stream.Consumer(ctx, bus.ToolRunnerConsumer(pool))
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
