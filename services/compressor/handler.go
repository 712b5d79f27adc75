package compressor

import (
	"context"
	"fmt"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// handle compresses one request and publishes the result on its reply
// subject (stored once per request id, so a redelivery is harmless).
func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	var req heraldpb.CompressRequest
	if err := bus.Decode(msg.Data(), &req); err != nil {
		return err
	}
	if err := validate(&req); err != nil {
		return bus.Permanent(err)
	}
	reply := req.ReplySubject
	if reply == "" {
		reply = bus.CompressResult(req.SessionId)
	}
	ctx, span := telemetry.StartCompress(ctx, &req)
	c := s.comp.compress(ctx, &req)
	telemetry.EndCompress(span, c.before, c.after, c.pruned, c.summarized, c.summaryErr)
	if c.summaryErr != nil {
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: let another instance do it properly
		}
		s.log.Warn().Err(c.summaryErr).Str("session_id", req.SessionId).Str("task_id", req.TaskId).
			Msg("model summary unavailable; wrote the deterministic summary")
	}
	res := &heraldpb.CompressResult{
		RequestId: req.RequestId, SessionId: req.SessionId, Messages: c.messages,
		TokensBefore: c.before, TokensAfter: c.after, PrunedToolOutputs: int32(c.pruned),
		SummaryUsage: c.spent.usage, SummaryCostUsd: c.spent.costUSD, SummaryApiCalls: c.spent.apiCalls,
		SummaryPricing: c.spent.pricing,
	}
	if err := bus.PublishProto(ctx, s.deps.JS, reply, req.RequestId, res); err != nil {
		return fmt.Errorf("compressor: reply for session %s: %w", req.SessionId, err)
	}
	s.log.Debug().Str("session_id", req.SessionId).Int64("tokens_before", c.before).
		Int64("tokens_after", c.after).Int("pruned", c.pruned).Bool("summarized", c.summarized).Msg("history compressed")
	return nil
}

func validate(req *heraldpb.CompressRequest) error {
	switch {
	case req.RequestId == "":
		return fmt.Errorf("%w: request_id is required", ErrInvalidRequest)
	case req.SessionId == "":
		return fmt.Errorf("%w: session_id is required", ErrInvalidRequest)
	case req.ProtectFirstN < 0 || req.ProtectLastN < 0:
		return fmt.Errorf("%w: protect_first_n and protect_last_n must not be negative", ErrInvalidRequest)
	case req.ContextWindow < 0:
		return fmt.Errorf("%w: context_window must not be negative", ErrInvalidRequest)
	}
	for i, m := range req.Messages {
		if m == nil {
			return fmt.Errorf("%w: message %d is empty", ErrInvalidRequest, i)
		}
		switch m.Role {
		case roleSystem, roleUser, roleAssistant, roleTool:
		default:
			return fmt.Errorf("%w: message %d has unknown role %q", ErrInvalidRequest, i, m.Role)
		}
	}
	return nil
}
