package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// queued tells req's session its model call waits for a limit ev names
// (the session's other queued events come from the loop, admit.go).
func (s *Service) queued(req *heraldpb.LLMRequest, ev proto.Event) {
	ev.Type, ev.SessionID, ev.TaskID = proto.EventQueued, req.GetSessionId(), req.GetTaskId()
	ev.Step, ev.RequestID, ev.BoundTenant = int(req.GetStep()), req.GetRequestId(), req.GetBoundTenant()
	if err := bus.PublishEvent(s.nc, ev); err != nil {
		s.log.Warn().Err(err).Str("session_id", ev.SessionID).Msg("queued event not published")
	}
}

// limitCall holds a model call to its tenant's max_concurrent_model_calls,
// counted across every gateway (bus.Slots): a call beyond it waits in the
// worker's window (bus.Wait), never fails, and goes when a slot frees,
// oldest first. done frees the slot. A call redelivered after its gateway
// died finds its slot still its own (the same request id) and frees it.
func (s *Service) limitCall(ctx context.Context, req *heraldpb.LLMRequest, msg jetstream.Msg) (done func(), err error) {
	tenant := req.GetTenant()
	if tenant == "" {
		tenant = bus.TenantOf(ctx)
	}
	limit := s.tenants.Tenants[tenant].MaxConcurrentModelCalls
	if tenant == "" || limit <= 0 {
		return func() {}, nil
	}
	scope, holder := bus.ModelCallsScope(tenant), req.GetRequestId()
	if holder == "" {
		holder = msg.Subject()
	}
	place, err := s.slots.Acquire(ctx, scope, limit, holder, publishedAt(msg).UnixNano())
	if err != nil {
		return nil, err
	}
	if place.Position > 0 {
		if place.Moved {
			s.queued(req, proto.Event{Position: place.Position, Limit: proto.LimitModelCalls,
				Message: fmt.Sprintf("tenant %s has %d model calls in flight, its max_concurrent_model_calls; this call goes when one ends", tenant, limit)})
		}
		return nil, bus.WaitAt(scope, place.Position, fmt.Errorf("tenant %s is at max_concurrent_model_calls %d", tenant, limit))
	}
	bus.Through(ctx) // the calls waiting behind it move up now, not when it ends
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.slots.Release(rctx, scope, holder); err != nil {
			s.log.Warn().Err(err).Str("tenant", tenant).Msg("model-call slot not released; it frees itself after its lease")
		}
	}, nil
}
