package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/pkg/telemetry"
	heraldproto "github.com/heraldrun/herald/proto"
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
// the call's running totals, and the tenant's spend. It returns the cost.
func (r *callRun) bill(ctx context.Context, ep endpoint, u *heraldpb.Usage, c pricing.Charges, latency time.Duration, ae *attemptError) uint64 {
	if u == nil {
		u = &heraldpb.Usage{}
	}
	model := r.modelFor(ep)
	now := time.Now()
	cost, source := r.s.pricer.Charge(model, now, u, c)
	addUsage(r.usage, u)
	countPricing(r.pricing, model, source, u)
	r.costNano += cost
	ev := &heraldpb.UsageEvent{
		EventId:         r.eventID(),
		TsUnixMs:        now.UnixMilli(),
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
	if reported(u) {
		ev.Carried = r.carried(model, u)
	}
	if ae != nil {
		ev.Status, ev.ErrorClass = StatusError, string(ae.class)
		ev.ErrorMessage = usageErrorMessage(ae, ep.apiKey)
	}
	telemetry.ModelAttempt(ep.provider, model, ev.ErrorClass, r.tenant, latency, u, cost)
	r.billed = append(r.billed, r.s.publishUsage(ev))
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	r.s.budget.settle(pctx, r.hold, cost)
	r.hold = nil
	return cost
}

// maxUsageErrorMessage bounds the provider's message a usage event carries
// (a provider may answer with a page of HTML).
const maxUsageErrorMessage = 500

// usageErrorMessage is what a failed attempt's usage event says of it: the
// HTTP status and the provider's own message, redacted (again: the detail
// already is, and a usage event is stored for good) and cut to
// maxUsageErrorMessage bytes on a character boundary.
func usageErrorMessage(ae *attemptError, key string) string {
	msg := redact(ae.detail, key)
	if ae.status != 0 {
		msg = fmt.Sprintf("HTTP %d: %s", ae.status, msg)
	}
	return cutUTF8(strings.TrimSpace(msg), maxUsageErrorMessage)
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// countPricing counts one attempt: unpriced when its model has no price and
// it used tokens (an attempt that used none costs nothing, price or not).
func countPricing(p *heraldpb.Pricing, model, source string, u *heraldpb.Usage) {
	used := u.GetInputTokens()+u.GetOutputTokens()+u.GetCacheReadTokens()+u.GetCacheWriteTokens() > 0
	if source != PriceUnknown || !used {
		p.PricedCalls++
		return
	}
	p.UnpricedCalls++
	p.UnpricedModels = heraldproto.AddModels(p.UnpricedModels, model)
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
// was refused is published again synchronously (its id keeps it single). It
// reports whether every one is stored; one that is not is logged.
func (r *callRun) awaitUsage(ctx context.Context) bool {
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	stored := true
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
			stored = false
			r.s.log.Error().Err(err).Str("session_id", p.ev.GetSessionId()).Str("event_id", p.ev.GetEventId()).Msg("usage event not stored")
		}
	}
	r.billed = nil
	return stored
}

// record stores the call's response on the request's reply subject (its id
// the request id) while its usage events are being stored, and returns once
// both are. The response carries its usage events: a gateway that dies with
// the answer stored and the usage not leaves the request unacknowledged, and
// the gateway it comes back to finds the answer and stores them from it
// (restoreUsage). A usage event that could not be stored fails the request
// the same way, so it comes back and is stored then.
func (r *callRun) record(ctx context.Context, resp *heraldpb.LLMResponse) error {
	for _, p := range r.billed {
		resp.UsageEvents = append(resp.UsageEvents, withoutCarried(p.ev))
	}
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	answer := bus.NewBatch(r.s.js)
	answer.Proto(pctx, r.req.GetReplySubject(), r.req.GetRequestId(), resp)
	usageStored := r.awaitUsage(ctx)
	if err := answer.Wait(pctx); err != nil {
		return fmt.Errorf("publish response to %s: %w", r.req.GetRequestId(), err)
	}
	if !usageStored {
		return fmt.Errorf("request %s: its answer is stored but not all its usage events; they are stored from the answer when it comes back", r.req.GetRequestId())
	}
	return nil
}

// restoreUsage stores again the usage events of a stored answer found for a
// redelivered request: the gateway that stored it may have died before they
// were. Their ids keep each stored once (the accounting sink checks them
// too, past the stream's dedupe window).
func (s *Service) restoreUsage(ctx context.Context, req *heraldpb.LLMRequest, prev *heraldpb.LLMResponse) error {
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	b := bus.NewBatch(s.js)
	for _, ev := range prev.GetUsageEvents() {
		s.recarry(req, ev)
		b.Proto(pctx, bus.UsageSubject(ev.GetTenant()), ev.GetEventId(), ev)
	}
	if err := b.Wait(pctx); err != nil {
		return fmt.Errorf("store usage of the earlier answer to %s: %w", prev.GetRequestId(), err)
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

// reported: the provider counted tokens for the attempt (it was served,
// even if its answer then broke off).
func reported(u *heraldpb.Usage) bool {
	return u.GetInputTokens()+u.GetOutputTokens()+u.GetCacheReadTokens()+u.GetCacheWriteTokens() > 0
}

func addUsage(sum, u *heraldpb.Usage) {
	sum.InputTokens += u.GetInputTokens()
	sum.OutputTokens += u.GetOutputTokens()
	sum.CacheReadTokens += u.GetCacheReadTokens()
	sum.CacheWriteTokens += u.GetCacheWriteTokens()
	sum.ReasoningTokens += u.GetReasoningTokens()
}
