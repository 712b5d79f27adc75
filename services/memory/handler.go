package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// Tools this service executes.
const (
	ToolMemory        = "memory"
	ToolSessionSearch = "session_search"
)

// handleCall runs one tool call routed to the memory service. A call whose
// result is already stored (a redelivery) is acknowledged without running
// it again.
func (s *Service) handleCall(ctx context.Context, msg jetstream.Msg) error {
	var req heraldpb.ToolCallRequest
	if err := bus.Decode(msg.Data(), &req); err != nil {
		return err
	}
	if req.CallId == "" || req.SessionId == "" {
		return bus.Permanent(errors.New("tool call needs call_id and session_id"))
	}
	resultSubject := bus.ToolResult(req.SessionId, req.CallId)
	_, err := bus.LastOnSubject(ctx, s.deps.JS, bus.StreamToolResults, resultSubject)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("look up result of call %s: %w", req.CallId, err)
	}
	ctx, _ = telemetry.StartTool(ctx, &req)
	s.event(&req, proto.EventToolStarted, "")
	started := time.Now()
	content, st, err := s.executeAllowed(ctx, &req)
	telemetry.EndTool(ctx, req.Tool, toolStatus(st, err), content, s.runner(), time.Since(started))
	if err != nil {
		return err
	}
	res := &heraldpb.ToolResult{
		CallId: req.CallId, SessionId: req.SessionId, Step: req.Step, Tool: req.Tool,
		Content: content, IsError: st != "ok", Status: st,
		DurationMs: time.Since(started).Milliseconds(), Runner: s.runner(),
	}
	if err := bus.PublishProto(ctx, s.deps.JS, resultSubject, req.SessionId+":"+req.CallId, res); err != nil {
		return err
	}
	s.toolEvent(ctx, &req, res)
	s.event(&req, proto.EventToolFinished, res.Status)
	return nil
}

// execute returns the result text and whether it reports an error the model
// should see; err is an infrastructure failure worth a retry.
func (s *Service) execute(ctx context.Context, req *heraldpb.ToolCallRequest) (string, bool, error) {
	var out any
	switch req.Tool {
	case ToolMemory:
		o, err := s.runMemory(ctx, s.tenant(req.Tenant), req.Arguments)
		if err != nil {
			return "", false, err
		}
		out = o
	case ToolSessionSearch:
		o, err := s.runSessionSearch(ctx, req)
		if err != nil {
			return "", false, err
		}
		out = o
	default:
		return fmt.Sprintf(`{"success":false,"error":%q}`,
			fmt.Sprintf("%v: the memory service runs %s and %s, not %q", ErrUnknownTool, ToolMemory, ToolSessionSearch, req.Tool)), true, nil
	}
	data, err := json.Marshal(out)
	if err != nil {
		return "", false, bus.Permanent(err)
	}
	return string(data), isFailure(out), nil
}

func isFailure(out any) bool {
	switch o := out.(type) {
	case memoryOutcome:
		return !o.Success
	case searchOutcome:
		return !o.Success
	}
	return false
}

func statusOf(isErr bool) string {
	if isErr {
		return "error"
	}
	return "ok"
}

func (s *Service) tenant(t string) string {
	if t == "" {
		return s.cfg.DefaultTenant
	}
	return t
}

func (s *Service) runner() string {
	if s.deps.Instance != "" {
		return s.deps.Instance
	}
	return "memory"
}

// toolEvent records the execution for accounting; a failure is logged, not
// retried, since the result (what the session needs) is already stored.
func (s *Service) toolEvent(ctx context.Context, req *heraldpb.ToolCallRequest, res *heraldpb.ToolResult) {
	id := req.SessionId + ":" + req.CallId
	ev := &heraldpb.ToolEvent{
		EventId: id, TsUnixMs: time.Now().UnixMilli(), Tenant: s.tenant(req.Tenant),
		SessionId: req.SessionId, TaskId: req.TaskId, CallId: req.CallId, Tool: req.Tool,
		Runner: res.Runner, DurationMs: res.DurationMs, Status: res.Status, OutputBytes: int64(len(res.Content)),
	}
	if err := bus.PublishProto(ctx, s.deps.JS, bus.ToolEventSubject(ev.Tenant), id, ev); err != nil {
		s.log.Warn().Err(err).Str("session_id", req.SessionId).Str("call_id", req.CallId).Msg("tool event not recorded")
	}
}

func (s *Service) event(req *heraldpb.ToolCallRequest, typ, st string) {
	ev := proto.Event{Type: typ, SessionID: req.SessionId, TaskID: req.TaskId, Step: int(req.Step),
		Tool: req.Tool, CallID: req.CallId, Status: st, BoundTenant: bus.WorkspaceTenant(req.Tenant, req.Workspace)}
	if typ == proto.EventToolStarted {
		ev.Args = req.Arguments
	}
	if err := bus.PublishEvent(s.deps.NC, ev); err != nil {
		s.log.Debug().Err(err).Str("session_id", req.SessionId).Msg("progress event not sent")
	}
}
