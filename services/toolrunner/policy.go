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
