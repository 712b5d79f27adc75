package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/pkg/telemetry"
	hproto "github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"google.golang.org/protobuf/proto"
)

// callRun is one LLM request being served: every attempt on every provider
// of its chain, the usage they add up to, and the progress they publish.
type callRun struct {
	s        *Service
	req      *heraldpb.LLMRequest
	tenant   string
	started  time.Time
	delivery uint64
	attempts int
	usage    *heraldpb.Usage
	costNano uint64
	// pricing counts the attempts by whether their model had a price.
	pricing  *heraldpb.Pricing
	progress *progress
	// billed are the usage events being stored, awaited by record.
	billed []pendingUsage
	// wire are the encodings of the request's history messages.
	wire []*wireSlot
	// hold is the current attempt's reservation in its budget windows.
	hold *budgetHold
}

func (s *Service) newRun(req *heraldpb.LLMRequest, delivery uint64) *callRun {
	return &callRun{s: s, req: req, tenant: tenantOf(req, s.cfg.Tenant), started: time.Now(), delivery: delivery,
		usage: &heraldpb.Usage{}, pricing: &heraldpb.Pricing{}, progress: &progress{s: s, req: req}}
}

// serve answers the request: attempts with retries along the fallback
// chain. It always returns a response; failures are described in it.
func (r *callRun) serve(ctx context.Context) *heraldpb.LLMResponse {
	s, req := r.s, r.req
	chain := s.health.chain(req, len(s.endpoints))
	var last *attemptError
	var lastEp endpoint
	for i, idx := range chain {
		ep := s.endpoints[idx]
		ep.model = r.modelFor(ep) // events and errors name the model called, not the configured one
		if i > 0 {
			s.counters.fallbacks.Add(1)
			r.progress.fallback(lastEp, ep, last)
			telemetry.ModelFallback(ctx, lastEp.provider, ep.provider, string(last.class))
		}
		ans, ae := r.onEndpoint(ctx, ep, i < len(chain)-1)
		if ae == nil {
			s.health.servedBy(req, idx)
			return r.success(ep, ans)
		}
		last, lastEp = ae, ep
		if ae.class == ClassRateLimit {
			s.health.coolDown(idx)
		}
		if !ae.policy.Fallback || ctx.Err() != nil {
			break
		}
	}
	return r.failure(lastEp, last)
}

// OverloadedAttempts bounds the attempts on an overloaded provider (HTTP
// 503/529, Anthropic's overloaded_error) when a fallback can take over: the
// first and two retries, as the providers' own SDKs retry by default, then
// the next provider. Without a fallback the whole agent.api_max_retries
// budget is spent on it; a smaller budget bounds it too.
const OverloadedAttempts = 3

// onEndpoint makes up to MaxAttempts attempts on ep, and on an overloaded
// ep at most OverloadedAttempts when a fallback can take over.
func (r *callRun) onEndpoint(ctx context.Context, ep endpoint, hasNext bool) (modelAnswer, *attemptError) {
	for try := 1; ; try++ {
		ans, ae := r.attempt(ctx, ep)
		if ae == nil {
			return ans, nil
		}
		budget := r.s.cfg.MaxAttempts
		if hasNext && ae.class == ClassOverloaded {
			budget = min(budget, OverloadedAttempts)
		}
		if !ae.policy.Retryable || try >= budget {
			return modelAnswer{}, ae
		}
		wait := retryDelay(r.s.cfg.Retry, try, ae)
		r.s.counters.retries.Add(1)
		r.progress.retry(ep, try, ae, wait)
		telemetry.ModelRetry(ctx, ep.provider, r.modelFor(ep), string(ae.class), try, wait)
		if !sleep(ctx, wait) {
			return modelAnswer{}, r.stopped(ctx, ae)
		}
	}
}

// attempt is one request to one provider, billed with its own usage event.
func (r *callRun) attempt(ctx context.Context, ep endpoint) (modelAnswer, *attemptError) {
	if ctx.Err() != nil {
		return modelAnswer{}, r.stopped(ctx, nil)
	}
	if ae := r.checkBudgets(ctx, ep); ae != nil {
		return modelAnswer{}, ae
	}
	// beyond the provider's limits the call waits here, not failing
	pass, err := r.s.gates.enter(ctx, ep.provider, estimateTokens(r.req), func(limit, message string) {
		r.progress.publish(hproto.Event{Type: hproto.EventQueued, Provider: ep.provider, Model: ep.model, Limit: limit, Message: message})
	})
	if err != nil {
		return modelAnswer{}, r.stopped(ctx, nil)
	}
	ans, ae := r.attemptOn(ctx, ep)
	used := ans.usage
	if ae != nil {
		used = nil
	}
	pass.leave(ctx, ep.provider, ae, used)
	return ans, ae
}

// attemptOn sends the request to ep once the provider's gate let it through.
func (r *callRun) attemptOn(ctx context.Context, ep endpoint) (modelAnswer, *attemptError) {
	r.attempts++
	r.s.counters.attempts.Add(1)
	r.apiRequestStarting(ep)
	actx, cancel := context.WithTimeout(ctx, r.s.cfg.Retry.CallTimeout)
	defer cancel()
	t0 := time.Now()
	ans, err := r.ask(actx, ep)
	latency := time.Since(t0)
	if err == nil && ctx.Err() == nil {
		ans.message.Content = ScrubMemoryContext(ans.message.GetContent())
		ans.message.Reasoning = ScrubMemoryContext(ans.message.GetReasoning())
		cost := r.bill(ctx, ep, ans.usage, pricing.Charges{Served: true, Fees: ans.fees}, latency, nil)
		r.apiRequestDone(ep, ans.usage, cost, latency, nil)
		return ans, nil
	}
	spent := spentUsage(err) // failed after the provider reported usage: those tokens were used
	if err == nil {
		spent = ans.usage // finished as it was stopped: its tokens were still used
	}
	ae := classify(err)
	if ctx.Err() != nil {
		ae = r.stopped(ctx, ae)
	}
	ae.detail = redact(ae.detail, ep.apiKey)
	cost := r.bill(ctx, ep, spent, pricing.Charges{Served: reported(spent)}, latency, ae)
	r.apiRequestDone(ep, spent, cost, latency, ae)
	return modelAnswer{}, ae
}

func (r *callRun) ask(ctx context.Context, ep endpoint) (modelAnswer, error) {
	if ep.apiKey == "" && !isLocal(ep.baseURL) {
		return modelAnswer{}, newAttemptError(ClassAuth, fmt.Sprintf(
			"no API key is configured for %s: set api_key_env in herald.yaml, HERALD_API_KEY or the provider's usual variable", ep.provider), nil)
	}
	streamed := r.req.GetStream()
	call := modelCall{model: r.modelFor(ep), messages: r.req.GetMessages(), tools: r.req.GetTools(), toolsKey: r.req.GetToolsDigest(),
		maxOut: int64(r.req.GetMaxOutputTokens()), stream: streamed && ep.profile.Stream, wire: r.wire}
	call.reasoning = resolveReasoning(r.s.cfg.Reasoning, call.model, r.req.GetReasoning())
	if streamed {
		call.onDelta = r.progress.delta
		r.progress.begin(ep.provider, call.model)
		defer r.progress.endStream()
	}
	ans, err := r.s.clients[ep.index].complete(ctx, call)
	if err != nil {
		return ans, err
	}
	if streamed && !call.stream {
		// asked whole (the profile's stream: false): the user still sees the text
		r.progress.delta(ans.message.GetContent())
	}
	stableToolIDs(ans.message, r.req.GetRequestId())
	return ans, nil
}

// stableToolIDs names tool calls that came without an id (some local
// servers and compatible endpoints send none) after the request and the
// call's place in the answer, so a retried or redelivered request names
// them alike and every tool result finds its call.
func stableToolIDs(m *heraldpb.ChatMessage, requestID string) {
	for i, tc := range m.GetToolCalls() {
		if tc.GetId() == "" {
			sum := sha256.Sum256([]byte(requestID))
			tc.Id = fmt.Sprintf("call_%x_%d", sum[:6], i)
		}
	}
}

// modelFor is the model to ask ep for: the request's choice on the primary,
// the fallback's own model otherwise.
func (r *callRun) modelFor(ep endpoint) string {
	if ep.index == 0 && r.req.GetModel() != "" {
		return r.req.GetModel()
	}
	return ep.model
}

// checkBudgets refuses an attempt over the task's max_cost_usd or a budget
// window, and otherwise holds its estimated cost in its windows (settled
// by bill).
func (r *callRun) checkBudgets(ctx context.Context, ep endpoint) *attemptError {
	if ae := checkSessionBudget(r.req, r.costNano); ae != nil {
		return ae
	}
	hold, ae := r.s.budget.reserve(ctx, r, ep)
	r.hold = hold
	return ae
}

// stopped explains an attempt cut short by its context.
func (r *callRun) stopped(ctx context.Context, cause *attemptError) *attemptError {
	if interrupted(ctx) {
		return newAttemptError(ClassInterrupted, "the call was interrupted by the user", errInterrupted)
	}
	if cause == nil {
		cause = newAttemptError(ClassUnknown, "the call was cancelled", ctx.Err())
	}
	return cause
}

// success is the answer as the provider completed it. When its final form
// holds no text although text was streamed (a Responses API stream whose
// completed event lists no output), the text the user saw is the answer.
func (r *callRun) success(ep endpoint, ans modelAnswer) *heraldpb.LLMResponse {
	resp := r.response(ep)
	resp.Message = ans.message
	if streamed := r.progress.streamed(); isBlank(ans.message.GetContent()) && !isBlank(streamed) {
		resp.Message.Content = streamed
	}
	resp.FinishReason = ans.finishReason
	resp.PromptTokens = ans.promptTokens
	return resp
}

// failure describes a call that gave up, with what its last attempt had
// already streamed, so the loop can keep the part of the answer the user saw.
func (r *callRun) failure(ep endpoint, ae *attemptError) *heraldpb.LLMResponse {
	resp := r.response(ep)
	resp.ErrorClass = string(ae.class)
	resp.Error = r.describe(ep, ae)
	resp.PartialContent = r.progress.streamed()
	return resp
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// describe is the failure message a person reads: which provider, what went
// wrong, and how many attempts were made. It never holds a credential.
func (r *callRun) describe(ep endpoint, ae *attemptError) string {
	switch ae.class {
	case ClassBudgetExceeded, ClassInterrupted:
		return ae.detail
	}
	msg := fmt.Sprintf("%s: %s", ep, ae.Error())
	if r.attempts > 1 {
		msg += fmt.Sprintf(" (after %d attempts)", r.attempts)
	}
	return redact(msg, ep.apiKey)
}

func (r *callRun) response(ep endpoint) *heraldpb.LLMResponse {
	return &heraldpb.LLMResponse{
		RequestId:  r.req.GetRequestId(),
		SessionId:  r.req.GetSessionId(),
		Step:       r.req.GetStep(),
		Usage:      proto.Clone(r.usage).(*heraldpb.Usage),
		CostUsd:    float64(r.costNano) / nanoPerUSD,
		Pricing:    proto.Clone(r.pricing).(*heraldpb.Pricing),
		Provider:   ep.provider,
		Model:      r.modelFor(ep),
		ApiMode:    ep.mode,
		Attempts:   int32(r.attempts),
		IsFallback: ep.isFallback(),
		LatencyMs:  time.Since(r.started).Milliseconds(),
	}
}

func tenantOf(req *heraldpb.LLMRequest, def string) string {
	if req.GetTenant() != "" {
		return req.GetTenant()
	}
	return def
}

// publishCtx outlives the call's own context, so an interrupted or timed-out
// attempt is still billed.
func publishCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
}
