package gateway

import (
	"time"

	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// apiRequest is the pre_api_request event of the current attempt; its id
// is the attempt's usage event id, so pre and post events pair up.
func (r *callRun) apiRequest(ep endpoint) hooks.APIRequest {
	return hooks.APIRequest{RequestID: r.eventID(), SessionID: r.req.GetSessionId(), Provider: ep.provider,
		Model: r.modelFor(ep), Attempt: r.attempts, Turn: int(r.req.GetTurn()), Step: int(r.req.GetStep())}
}

// apiRequestStarting publishes pre_api_request before an attempt.
func (r *callRun) apiRequestStarting(ep endpoint) { r.s.hooks.APIRequestStarting(r.apiRequest(ep)) }

// apiRequestDone publishes post_api_request after an attempt, with what it
// was billed.
func (r *callRun) apiRequestDone(ep endpoint, u *heraldpb.Usage, cost uint64, latency time.Duration, ae *attemptError) {
	if u == nil {
		u = &heraldpb.Usage{}
	}
	ev := hooks.APIResponse{APIRequest: r.apiRequest(ep), CostUSD: float64(cost) / nanoPerUSD,
		LatencyMS: latency.Milliseconds(), Status: StatusOK,
		Usage: hooks.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), CacheReadTokens: u.GetCacheReadTokens(),
			CacheWriteTokens: u.GetCacheWriteTokens(), ReasoningTokens: u.GetReasoningTokens()}}
	if ae != nil {
		ev.Status, ev.ErrorClass = StatusError, string(ae.class)
	}
	r.s.hooks.APIRequestDone(ev)
}
