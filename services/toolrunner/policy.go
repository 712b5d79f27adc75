package toolrunner

import (
	"context"

	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// policyRefuses asks the pre_tool_call hook about a call before it runs: a
// platform's policy engine may refuse it, and the reason it gives is what
// the model reads. With no policy listening the call runs, unless
// hooks.pre_tool_call is required.
func (s *Service) policyRefuses(ctx context.Context, req *heraldpb.ToolCallRequest) (outcome, bool) {
	d := s.hooks.MayCallTool(ctx, hooks.ToolCall{SessionID: req.GetSessionId(), TaskID: req.GetTaskId(),
		Tenant: s.tenantOf(req), CallID: req.GetCallId(), Tool: req.GetTool(), Arguments: hooks.ArgumentsJSON(req.GetArguments())})
	if d.Allow {
		return outcome{}, false
	}
	// A refusal is policy, not the tool failing: it does not trip the breaker.
	return outcome{status: statusDenied, content: d.Reason, correctable: true}, true
}

// askPolicyEarly starts the pre_tool_call ask of a call's first delivery
// while the runner looks for a stored result, a round trip off each call's
// path; prepare takes its answer. A redelivered call, or one of a tool this
// runner lacks, is asked later, only when it is about to run. (A first
// delivery has a stored result only when the loop sent the call again after
// the dedupe window; then the plugin was asked about a call answered from
// its result.)
func (s *Service) askPolicyEarly(ctx context.Context, req *heraldpb.ToolCallRequest, delivered uint64) func() (outcome, bool) {
	if _, _, known := s.lookup(req.GetTool()); !known || delivered > 1 {
		return nil
	}
	type answer struct {
		o       outcome
		refused bool
	}
	got := inBackground(func() answer {
		o, refused := s.policyRefuses(ctx, req)
		return answer{o, refused}
	})
	return func() (outcome, bool) {
		a := got()
		return a.o, a.refused
	}
}
