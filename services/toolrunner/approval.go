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
	return s.decide(ctx, c, "command", command, classifyCommand(command))
}

// approvalsMode is the call's approvals mode: the task's, else the runner's.
func (s *Service) approvalsMode(c *call) string {
	if mode := c.req.GetApprovalsMode(); mode != "" {
		return mode
	}
	return s.cfg.ApprovalsMode
}

// decide applies the approvals mode to a classified command or program
// (what: "command" or "program"; shown is what a person approving sees).
func (s *Service) decide(ctx context.Context, c *call, what, shown string, cl classification) (outcome, bool) {
	switch cl.verdict {
	case safeCommand:
		return outcome{}, true
	case alwaysBlocked:
		return outcome{status: statusDenied, content: fmt.Sprintf(
			"blocked: this %s %s and is never allowed. Do not try to work around this; choose a different approach.", what, cl.reason)}, false
	}
	mode := s.approvalsMode(c)
	// deny is a policy: it wins over a task's own pre-approval.
	switch {
	case mode == ApprovalsDeny:
		return denied(what, cl, "approvals are set to deny"), false
	case mode == ApprovalsOff || c.req.GetApproved():
		return outcome{}, true
	}
	ev := proto.Event{Type: proto.EventApproval, RequestID: requestID("approval", c.req), Args: shown,
		Message: fmt.Sprintf("The agent wants to run a %s that %s. Approve?", what, cl.reason), Choices: []string{"yes", "no"}}
	in, answered, err := s.ask(ctx, c.req, ev)
	switch {
	case err != nil:
		return denied(what, cl, err.Error()), false
	case !answered:
		return denied(what, cl, fmt.Sprintf("nobody approved it within %s", s.cfg.ApprovalTimeout)), false
	case !approvedBy(in):
		return denied(what, cl, "the user refused it"), false
	}
	return outcome{}, true
}

func denied(what string, cl classification, why string) outcome {
	return outcome{status: statusDenied, content: fmt.Sprintf(
		"denied: this %s %s and needs approval; %s. It was not run. Ask the user or find a safer way.", what, cl.reason, why)}
}
