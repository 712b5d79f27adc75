package toolrunner

import (
	"context"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// maxEventArgs bounds the arguments shown in a tool_started event.
const maxEventArgs = 300

// event publishes a progress event on the session's events subject;
// tool_started carries the call's arguments (shortened) so watchers see what runs.
func (s *Service) event(req *heraldpb.ToolCallRequest, typ, status string) {
	var args string
	if typ == proto.EventToolStarted {
		args = req.GetArguments()
		if len(args) > maxEventArgs {
			args = args[:maxEventArgs] + "…"
		}
	}
	err := bus.PublishEvent(s.deps.NC, proto.Event{Type: typ, SessionID: req.GetSessionId(),
		TaskID: req.GetTaskId(), Step: int(req.GetStep()), Tool: req.GetTool(), CallID: req.GetCallId(), Status: status, Args: args,
		BoundTenant: bus.WorkspaceTenant(req.GetTenant(), req.GetWorkspace())})
	if err != nil {
		s.log.Warn().Err(err).Str("session_id", req.GetSessionId()).Str("call_id", req.GetCallId()).Msg("publishing a progress event failed")
	}
}

// toolEventID names one execution across all sessions: call ids ("t1s1c0")
// repeat in every session that reaches the same step, so the session id is
// part of it. The same execution redelivered keeps its id, so the stream
// (Nats-Msg-Id) and the sink both store it once.
func toolEventID(req *heraldpb.ToolCallRequest) string {
	return req.GetSessionId() + ":" + req.GetCallId()
}

// toolEvent records the execution for accounting's tool_events table.
func (s *Service) toolEvent(ctx context.Context, req *heraldpb.ToolCallRequest, o outcome, took time.Duration) {
	tenant := s.tenantOf(req)
	id := toolEventID(req)
	ev := &heraldpb.ToolEvent{EventId: id, TsUnixMs: time.Now().UnixMilli(), Tenant: tenant,
		SessionId: req.GetSessionId(), TaskId: req.GetTaskId(), CallId: req.GetCallId(), Tool: req.GetTool(),
		Runner: s.runner, DurationMs: took.Milliseconds(), Status: o.status, OutputBytes: int64(len(o.content))}
	if err := bus.PublishProto(ctx, s.deps.JS, bus.ToolEventSubject(tenant), id, ev); err != nil {
		s.log.Warn().Err(err).Str("session_id", req.GetSessionId()).Str("call_id", req.GetCallId()).Msg("publishing a tool event failed")
	}
}

// tenantOf is the tenant a call is attributed to.
func (s *Service) tenantOf(req *heraldpb.ToolCallRequest) string {
	return firstNonEmpty(req.GetTenant(), s.deps.Config.Tenant, "default")
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
