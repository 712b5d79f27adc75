package memory

import (
	"context"

	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// executeAllowed runs a call the pre_tool_call hook allows; a refused call's
// result is the policy's reason, with status denied.
func (s *Service) executeAllowed(ctx context.Context, req *heraldpb.ToolCallRequest) (content, status string, err error) {
	d := s.hooks.MayCallTool(ctx, hooks.ToolCall{SessionID: req.SessionId, TaskID: req.TaskId, Tenant: s.tenant(req.Tenant),
		CallID: req.CallId, Tool: req.Tool, Arguments: hooks.ArgumentsJSON(req.Arguments)})
	if !d.Allow {
		return d.Reason, "denied", nil
	}
	content, isErr, err := s.execute(ctx, req)
	return content, statusOf(isErr), err
}
