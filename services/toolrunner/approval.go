package toolrunner

import (
	"context"
	"fmt"

	"github.com/heraldrun/herald/proto"
)

// approve decides whether command may run. Always-blocked commands never
// run; dangerous ones run when approvals are off, when the task pre-approved
// them (herald run --yes) or when someone answers the prompt in time.
func (s *Service) approve(ctx context.Context, c *call, command string) (outcome, bool) {
	cl := classifyCommand(command)
	switch cl.verdict {
	case safeCommand:
		return outcome{}, true
	case alwaysBlocked:
		return outcome{status: statusDenied, content: fmt.Sprintf(
			"blocked: this command %s and is never allowed. Do not try to work around this; choose a different approach.", cl.reason)}, false
	}
	mode := c.req.GetApprovalsMode()
	if mode == "" {
		mode = s.cfg.ApprovalsMode
	}
	// deny is a policy: it wins over a task's own pre-approval.
	switch {
	case mode == ApprovalsDeny:
		return denied(cl, "approvals are set to deny"), false
	case mode == ApprovalsOff || c.req.GetApproved():
		return outcome{}, true
	}
	ev := proto.Event{Type: proto.EventApproval, RequestID: requestID("approval", c.req), Args: command,
		Message: fmt.Sprintf("The agent wants to run a command that %s. Approve?", cl.reason), Choices: []string{"yes", "no"}}
	in, answered, err := s.ask(ctx, c.req, ev)
	switch {
	case err != nil:
		return denied(cl, err.Error()), false
	case !answered:
		return denied(cl, fmt.Sprintf("nobody approved it within %s", s.cfg.ApprovalTimeout)), false
	case !approvedBy(in):
		return denied(cl, "the user refused it"), false
	}
	return outcome{}, true
}

func denied(cl classification, why string) outcome {
	return outcome{status: statusDenied, content: fmt.Sprintf(
		"denied: this command %s and needs approval; %s. It was not run. Ask the user or find a safer way.", cl.reason, why)}
}
