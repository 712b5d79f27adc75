package toolrunner

import (
	"context"
	"fmt"
	"strings"

	"github.com/heraldrun/herald/proto"
)

type clarifyArgs struct {
	Question string   `json:"question"`
	Choices  []string `json:"choices"`
}

// clarify asks the user a question on the session's events and returns the
// answer that comes back on its input subject.
func (s *Service) clarify(ctx context.Context, c *call) outcome {
	var a clarifyArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	if strings.TrimSpace(a.Question) == "" {
		return failed(argError(c.spec.Name, c.spec.Parameters, `field "question" must not be empty`))
	}
	ev := proto.Event{Type: proto.EventClarify, RequestID: requestID("clarify", c.req), Message: a.Question, Choices: a.Choices}
	in, answered, err := s.ask(ctx, c.req, ev)
	switch {
	case err != nil:
		return failed(fmt.Errorf("could not ask the user: %w", err))
	case !answered:
		return outcome{status: statusTimeout, content: fmt.Sprintf(
			"the user did not answer within %s; proceed with your best judgement and say which assumption you made", s.cfg.ApprovalTimeout)}
	case strings.TrimSpace(in.Answer) == "":
		return ok("the user gave an empty answer")
	}
	return ok("the user answered: " + in.Answer)
}
