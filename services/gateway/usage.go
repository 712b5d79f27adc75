package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
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
		EventId:         fmt.Sprintf("%s:%d", r.req.GetRequestId(), r.attempts),
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
	pctx, cancel := publishCtx(ctx)
	defer cancel()
	if err := bus.PublishProto(pctx, r.s.js, bus.UsageSubject(r.tenant), ev.EventId, ev); err != nil {
		r.s.log.Error().Err(err).Str("session_id", ev.SessionId).Str("event_id", ev.EventId).Msg("usage event not stored")
	}
	if err := r.s.spend.add(pctx, r.tenant, cost); err != nil {
		r.s.log.Warn().Err(err).Str("tenant", r.tenant).Msg("tenant spend not recorded")
	}
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
