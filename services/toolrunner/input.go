package toolrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
)

// ask publishes ev (a clarify question or an approval prompt) and waits for
// the matching answer on the session's input subject, up to the approvals
// timeout. The subscription is made before the question goes out, so an
// answer cannot slip in between.
func (s *Service) ask(ctx context.Context, req *heraldpb.ToolCallRequest, ev proto.Event) (proto.Input, bool, error) {
	answers := make(chan *nats.Msg, 16)
	sub, err := s.deps.NC.ChanSubscribe(bus.SessionInput(req.GetSessionId()), answers)
	if err != nil {
		return proto.Input{}, false, fmt.Errorf("listen for the answer: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// A tenant answers its own session's questions on its own subject.
	if tenant := bus.WorkspaceTenant(req.GetTenant(), req.GetWorkspace()); tenant != "" {
		tsub, err := s.deps.NC.ChanSubscribe(bus.TenantSessionInput(tenant, req.GetSessionId()), answers)
		if err != nil {
			return proto.Input{}, false, fmt.Errorf("listen for the answer: %w", err)
		}
		defer func() { _ = tsub.Unsubscribe() }()
	}
	ev.SessionID, ev.TaskID, ev.CallID, ev.Tool, ev.Step = req.GetSessionId(), req.GetTaskId(), req.GetCallId(), req.GetTool(), int(req.GetStep())
	ev.BoundTenant = bus.WorkspaceTenant(req.GetTenant(), req.GetWorkspace())
	ev.Deadline = time.Now().Add(s.cfg.ApprovalTimeout).UTC().Format(time.RFC3339)
	if err := bus.PublishEvent(s.deps.NC, ev); err != nil {
		return proto.Input{}, false, fmt.Errorf("ask: %w", err)
	}
	timer := time.NewTimer(s.cfg.ApprovalTimeout)
	defer timer.Stop()
	for {
		select {
		case m := <-answers:
			var in proto.Input
			if json.Unmarshal(m.Data, &in) == nil && isAnswer(in, ev.RequestID, req.GetCallId()) {
				return in, true, nil
			}
		case <-timer.C:
			return proto.Input{}, false, nil
		case <-ctx.Done():
			return proto.Input{}, false, ctx.Err()
		}
	}
}

// isAnswer reports whether in answers the request (by its id, or by call id
// when a client names only the call).
func isAnswer(in proto.Input, requestID, callID string) bool {
	if in.RequestID != "" {
		return in.RequestID == requestID
	}
	return in.CallID != "" && in.CallID == callID
}

// approvedBy reads an approval answer: an explicit flag, or a yes in words.
func approvedBy(in proto.Input) bool {
	if in.Approved != nil {
		return *in.Approved
	}
	switch strings.ToLower(strings.TrimSpace(in.Answer)) {
	case "y", "yes", "approve", "approved", "ok", "allow":
		return true
	}
	return false
}

func requestID(kind string, req *heraldpb.ToolCallRequest) string {
	return kind + "-" + bus.Token(req.GetSessionId()+":"+req.GetCallId())
}
