package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/pkg/toolset"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// publishTimeout bounds the publishes that record a finished call; they run
// even when the call itself was interrupted.
const publishTimeout = 10 * time.Second

// handle answers one LLM request. A malformed request is dead-lettered; a
// provider failure is an answer (an LLMResponse with an error), not a
// handler error; only a failure to record the answer redelivers the request.
func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	req := &heraldpb.LLMRequest{}
	if err := bus.Decode(msg.Data(), req); err != nil {
		return err
	}
	wire, err := s.histories.resolve(ctx, req)
	if err != nil {
		return err
	}
	if err := s.resolveTools(ctx, req); err != nil {
		return err
	}
	if err := validateRequest(req); err != nil {
		return bus.Permanent(err)
	}
	delivery := deliveryOf(msg)
	if delivery > 1 {
		if prev, err := s.alreadyAnswered(ctx, req, publishedAt(msg)); err != nil || prev != nil {
			if err != nil {
				return err
			}
			return s.restoreUsage(ctx, req, prev)
		}
		if s.dropIfStale(ctx, req) {
			return nil
		}
	}
	unlimit, err := s.limitCall(ctx, req, msg)
	if err != nil {
		return err
	}
	defer unlimit()
	callCtx, release := s.inflight.track(ctx, req.GetSessionId(), req.GetTaskId())
	defer release()
	run := s.newRun(req, delivery)
	run.wire = wire
	callCtx, span := telemetry.StartChat(callCtx, req)
	resp := run.serve(callCtx)
	telemetry.EndChat(span, resp)
	if ctx.Err() != nil && resp.GetErrorClass() != string(ClassInterrupted) {
		run.awaitUsage(ctx)
		return fmt.Errorf("request %s abandoned: %w", req.GetRequestId(), context.Cause(ctx))
	}
	s.counters.calls.Add(1)
	if resp.GetError() != "" {
		s.counters.failed.Add(1)
		s.logFailure(req, resp)
	}
	return run.record(ctx, resp)
}

// resolveTools puts back the tool set a request names by digest. A digest
// nothing is stored under is the sender's mistake, never fixed by waiting.
func (s *Service) resolveTools(ctx context.Context, req *heraldpb.LLMRequest) error {
	if req.GetToolsDigest() == "" || len(req.GetTools()) > 0 {
		return nil
	}
	tools, err := s.toolSets.Resolve(ctx, req.GetToolsDigest())
	if errors.Is(err, toolset.ErrUnknown) {
		return bus.Permanent(fmt.Errorf("LLM request %s: %w", req.GetRequestId(), err))
	}
	if err != nil {
		return err
	}
	req.Tools = tools
	return nil
}

// logFailure records a call that ended in an error: provider failures at
// info (the failure travels in the response to the task's result, which
// `herald run` prints; a service log at warn printed it a second time), the
// ones a user or a budget chose at debug.
func (s *Service) logFailure(req *heraldpb.LLMRequest, resp *heraldpb.LLMResponse) {
	ev := s.log.Info()
	switch ErrorClass(resp.GetErrorClass()) {
	case ClassInterrupted, ClassBudgetExceeded:
		ev = s.log.Debug()
	}
	ev.Str("session_id", req.GetSessionId()).Str("task_id", req.GetTaskId()).Str("model", resp.GetModel()).
		Str("provider", resp.GetProvider()).Str("error_class", resp.GetErrorClass()).Int32("attempts", resp.GetAttempts()).
		Str("error", resp.GetError()).Msg("LLM call failed")
}

// responsePrefix is where every reply subject must lie (the LLM_RESPONSES
// stream), so an answer can always be stored.
var responsePrefix = strings.TrimSuffix(bus.LLMResponseFilter(""), ".>")

func validateRequest(req *heraldpb.LLMRequest) error {
	switch {
	case req.GetRequestId() == "":
		return errors.New("LLM request without request_id")
	case !proto.IsToken(req.GetSessionId()):
		return fmt.Errorf("LLM request %s: session_id %q is not a valid subject token", req.GetRequestId(), req.GetSessionId())
	case !strings.HasPrefix(req.GetReplySubject(), responsePrefix) || strings.ContainsAny(req.GetReplySubject(), "*> \t"):
		return fmt.Errorf("LLM request %s: reply_subject %q is not a subject under %s", req.GetRequestId(), req.GetReplySubject(), responsePrefix)
	case len(req.GetMessages()) == 0:
		return fmt.Errorf("LLM request %s has no messages", req.GetRequestId())
	}
	return nil
}

// deliveryOf is how many times msg was handed out. Only a redelivered
// request can already have its answer stored (a gateway published it and
// died before the ack), so a first delivery skips that lookup, the largest
// cost the gateway would otherwise add to a call.
func deliveryOf(msg jetstream.Msg) uint64 {
	meta, err := msg.Metadata()
	if err != nil {
		return 2 // unknown: assume the worst and look
	}
	return meta.NumDelivered
}

// publishedAt is when msg was stored (zero when unknown).
func publishedAt(msg jetstream.Msg) time.Time {
	meta, err := msg.Metadata()
	if err != nil {
		return time.Time{}
	}
	return meta.Timestamp
}

// answerScan bounds how many answers on a reply subject are looked through
// for a redelivered request's own, from the first stored after the request.
const answerScan = 1024

// answerSkew is how much earlier than its request an answer's store time
// is looked for: the two streams' leaders may be different servers.
const answerSkew = time.Second

// alreadyAnswered returns this request's response when it is already
// stored: the request was redelivered after the answer was published but
// before the ack, and must not be sent to the model (and billed) again. The
// reply subject is the session's, so the answer is usually its last message,
// but the session may have moved on (its next request answered) before the
// redelivery: then the answers stored since the request was are looked
// through. An answer is found by its request id, never taken for another's.
func (s *Service) alreadyAnswered(ctx context.Context, req *heraldpb.LLMRequest, requested time.Time) (*heraldpb.LLMResponse, error) {
	subject := req.GetReplySubject()
	last, err := bus.LastOnSubject(ctx, s.js, bus.StreamLLMResponses, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up earlier response of %s: %w", req.GetRequestId(), err)
	}
	if prev := answerOf(last, req); prev != nil || requested.IsZero() {
		return prev, nil
	}
	m, err := bus.FirstOnSubjectSince(ctx, s.js, bus.StreamLLMResponses, subject, requested.Add(-answerSkew), last.Sequence)
	for n := 0; err == nil && n < answerScan && m.Sequence < last.Sequence; n++ {
		if prev := answerOf(m, req); prev != nil {
			return prev, nil
		}
		m, err = bus.NextOnSubject(ctx, s.js, bus.StreamLLMResponses, subject, m.Sequence+1)
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("look up earlier response of %s: %w", req.GetRequestId(), err)
	}
	return nil, nil
}

// answerOf is m decoded when it is req's answer.
func answerOf(m *jetstream.RawStreamMsg, req *heraldpb.LLMRequest) *heraldpb.LLMResponse {
	prev := &heraldpb.LLMResponse{}
	if bus.Decode(m.Data, prev) != nil || prev.GetRequestId() != req.GetRequestId() {
		return nil
	}
	return prev
}
