package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	protobuf "google.golang.org/protobuf/proto"
)

// Usage event statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// bill records one attempt: a usage event on the tenant's usage subject
// (event id <request_id>:<attempt>, so a re-published event is stored once),
// the call's running totals, and the tenant's spend.
func (r *callRun) bill(ctx context.Context, ep endpoint, u *heraldpb.Usage, latency time.Duration, ae *attemptError) {
	if u == nil {
		u = &heraldpb.Usage{}
	}
	model := r.modelFor(ep)
	cost, source := r.s.pricer.CostNano(model, u)
	addUsage(r.usage, u)
	r.costNano += cost
	ev := &heraldpb.UsageEvent{
		EventId:         r.eventID(),
		TsUnixMs:        time.Now().UnixMilli(),
		Tenant:          r.tenant,
		SessionId:       r.req.GetSessionId(),
		TaskId:          r.req.GetTaskId(),
		Purpose:         purposeOf(r.req),
		Provider:        ep.provider,
		Model:           model,
		ApiMode:         ep.mode,
		Usage:           u,
		CostNanoUsd:     cost,
		PriceSource:     source,
		LatencyMs:       latency.Milliseconds(),
		Status:          StatusOK,
		Attempt:         int32(r.attempts),
		IsFallback:      ep.isFallback(),
		ParentSessionId: r.req.GetParentSessionId(),
	}
	if ae != nil {
		ev.Status, ev.ErrorClass = StatusError, string(ae.class)
	}
	telemetry.ModelAttempt(ep.provider, model, ev.ErrorClass, r.tenant, latency, u, cost)
	r.billed = append(r.billed, r.s.publishUsage(ev))
	if cost == 0 {
		return
	}
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	if err := r.s.spend.add(pctx, r.tenant, cost); err != nil {
		r.s.log.Warn().Err(err).Str("tenant", r.tenant).Msg("tenant spend not recorded")
	}
}

// pendingUsage is a usage event whose store is being acknowledged.
type pendingUsage struct {
	ev  *heraldpb.UsageEvent
	ack jetstream.PubAckFuture
	err error
}

// publishUsage starts storing ev without waiting, so the acknowledgement
// overlaps with the rest of the call; record awaits it.
func (s *Service) publishUsage(ev *heraldpb.UsageEvent) pendingUsage {
	data, err := protobuf.Marshal(ev)
	if err != nil {
		return pendingUsage{ev: ev, err: err}
	}
	msg := bus.NewMsg(bus.UsageSubject(ev.GetTenant()), data)
	ack, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.GetEventId()))
	return pendingUsage{ev: ev, ack: ack, err: err}
}

// awaitUsage waits for every usage event of the call to be stored; one that
// was refused is published again synchronously (its id keeps it single). A
// usage event that cannot be stored is logged: the call itself stands.
func (r *callRun) awaitUsage(ctx context.Context) {
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	for _, p := range r.billed {
		err := p.err
		if err == nil {
			select {
			case <-p.ack.Ok():
				continue
			case err = <-p.ack.Err():
			case <-pctx.Done():
				err = pctx.Err()
			}
		}
		if err = bus.PublishProto(pctx, r.s.js, bus.UsageSubject(p.ev.GetTenant()), p.ev.GetEventId(), p.ev); err != nil {
			r.s.log.Error().Err(err).Str("session_id", p.ev.GetSessionId()).Str("event_id", p.ev.GetEventId()).Msg("usage event not stored")
		}
	}
	r.billed = nil
}

// record stores the call's usage events, then its response on the request's
// reply subject (its id the request id). In that order: a gateway that dies
// in between leaves a request without an answer, which is served again and
// billed under new event ids; the reverse would leave an answer whose
// redelivery is acknowledged with its usage never stored.
func (r *callRun) record(ctx context.Context, resp *heraldpb.LLMResponse) error {
	r.awaitUsage(ctx)
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	if err := bus.PublishProto(pctx, r.s.js, r.req.GetReplySubject(), r.req.GetRequestId(), resp); err != nil {
		return fmt.Errorf("publish response to %s: %w", r.req.GetRequestId(), err)
	}
	return nil
}

// eventID is <request_id>:<attempt>. Attempts made after a redelivery are
// new provider requests (and new costs), so they carry the delivery too:
// <request_id>:d<delivery>:<attempt>, never mistaken for the first run's.
func (r *callRun) eventID() string {
	if r.delivery > 1 {
		return fmt.Sprintf("%s:d%d:%d", r.req.GetRequestId(), r.delivery, r.attempts)
	}
	return fmt.Sprintf("%s:%d", r.req.GetRequestId(), r.attempts)
}

func purposeOf(req *heraldpb.LLMRequest) string {
	if req.GetPurpose() == "" {
		return "agent"
	}
	return req.GetPurpose()
}

func addUsage(sum, u *heraldpb.Usage) {
	sum.InputTokens += u.GetInputTokens()
	sum.OutputTokens += u.GetOutputTokens()
	sum.CacheReadTokens += u.GetCacheReadTokens()
	sum.CacheWriteTokens += u.GetCacheWriteTokens()
	sum.ReasoningTokens += u.GetReasoningTokens()
}
