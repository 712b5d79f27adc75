package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// handle executes one call from TOOL_CALLS. Problems with the call itself
// (bad arguments, unknown tool, a path outside the workspace) become error
// results the model reads; only a payload that is not a call is dead-lettered.
func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	req := &heraldpb.ToolCallRequest{}
	if err := bus.Decode(msg.Data(), req); err != nil {
		return err
	}
	if err := checkCall(req); err != nil {
		return bus.Permanent(err)
	}
	_, err := s.runCall(ctx, req, deliveries(msg))
	return err
}

// runCall runs req at most once: a call whose result is stored (a
// redelivery, or an execute_code program run again) is answered from it.
func (s *Service) runCall(ctx context.Context, req *heraldpb.ToolCallRequest, delivered uint64) (*heraldpb.ToolResult, error) {
	// read, asked and run while the stored result is looked up
	a := beside{
		streak: s.readStreak(ctx, req),
		policy: s.askPolicyEarly(ctx, req, delivered),
		early:  s.runEarly(ctx, req, delivered),
	}
	if res, err := s.storedResult(ctx, req); err != nil || res != nil {
		return res, err
	}
	start := time.Now()
	ctx, _ = telemetry.StartTool(ctx, req)
	c, o := s.prepare(ctx, req, delivered, a)
	var took time.Duration
	switch {
	case c != nil && a.early != nil:
		s.event(req, proto.EventToolStarted, "")
		o, took = a.early.outcome()
		o = settled(ctx, c, o)
	case c != nil:
		o = s.execute(ctx, c)
		c.ws.close()
		took = time.Since(start)
	default:
		took = time.Since(start)
	}
	return s.finish(ctx, req, o, took, a.streak)
}

// beside is what a call starts at once, beside the lookup of its stored
// result: the read of its breaker streak, the pre_tool_call ask (nil: asked
// when the call is about to run) and, for a tool that only reads the
// workspace, the run itself (nil: run once it may).
type beside struct {
	streak func() failureStreak
	policy func() (outcome, bool)
	early  *earlyRun
}

func checkCall(req *heraldpb.ToolCallRequest) error {
	switch {
	case !proto.IsToken(req.GetSessionId()):
		return fmt.Errorf("%w: session_id %q is missing or not a subject token", ErrMalformedCall, req.GetSessionId())
	case req.GetCallId() == "":
		return fmt.Errorf("%w: call_id is missing", ErrMalformedCall)
	case req.GetTool() == "":
		return fmt.Errorf("%w: tool is missing", ErrMalformedCall)
	}
	return nil
}

// storedResult is the call's result when it already has one.
func (s *Service) storedResult(ctx context.Context, req *heraldpb.ToolCallRequest) (*heraldpb.ToolResult, error) {
	m, err := bus.LastOnSubject(ctx, s.deps.JS, bus.StreamToolResults, bus.ToolResult(req.GetSessionId(), req.GetCallId()))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up result of %s: %w", req.GetCallId(), err)
	}
	res := &heraldpb.ToolResult{}
	if err := bus.Decode(m.Data, res); err != nil {
		// It exists, so the call ran: never again, whatever became of its bytes.
		s.log.Warn().Err(err).Str("session_id", req.GetSessionId()).Str("call_id", req.GetCallId()).Msg("stored tool result unreadable")
		return &heraldpb.ToolResult{CallId: req.GetCallId(), SessionId: req.GetSessionId(), Tool: req.GetTool(), IsError: true,
			Status: statusUnknown, Content: "outcome unknown: this call's stored result cannot be read; check before re-running it"}, nil
	}
	return res, nil
}

func deliveries(msg jetstream.Msg) uint64 {
	if meta, err := msg.Metadata(); err == nil {
		return meta.NumDelivered
	}
	return 1
}

// prepare resolves what the call needs; when it cannot run, the returned
// outcome says why.
func (s *Service) prepare(ctx context.Context, req *heraldpb.ToolCallRequest, delivered uint64, a beside) (*call, outcome) {
	t, spec, found := s.lookup(req.GetTool())
	if !found || t == nil {
		return nil, failed(fmt.Errorf("%w %q; this runner offers: %s", ErrUnknownTool, req.GetTool(), s.toolNames()))
	}
	if !spec.Idempotent && delivered > 1 {
		if o, unknown := s.unknownOutcome(ctx, req); unknown {
			return nil, o
		}
	}
	policy := a.policy
	if policy == nil {
		policy = func() (outcome, bool) { return s.policyRefuses(ctx, req) }
	}
	if o, refused := policy(); refused {
		return nil, o
	}
	if o, open := s.breakerOpen(req, a.streak()); open {
		return nil, o
	}
	if a.early != nil {
		return a.early.c, outcome{}
	}
	return s.newCall(req, spec, t, delivered)
}

// newCall is req ready to run in its workspace.
func (s *Service) newCall(req *heraldpb.ToolCallRequest, spec toolspec.Spec, t tool, delivered uint64) (*call, outcome) {
	// A workspace in the tenants' folder is the call's own tenant's only.
	if parts, err := workspaceParts(req.GetWorkspace()); err == nil && len(parts) > 1 && parts[0] == bus.TenantsFolder && parts[1] != req.GetTenant() {
		return nil, failed(fmt.Errorf("workspace %q: %w (a call of tenant %q)", req.GetWorkspace(), ErrOutsideWorkspace, req.GetTenant()))
	}
	ws, err := openWorkspace(s.cfg.WorkspaceRoot, req.GetWorkspace(), s.cfg.DataDir)
	if err != nil {
		return nil, failed(err)
	}
	return &call{req: req, spec: spec, run: t, ws: ws, delivered: delivered}, outcome{}
}

// unknownOutcome answers a non-idempotent call that a runner began before it
// stopped: running it again could repeat its effects.
func (s *Service) unknownOutcome(ctx context.Context, req *heraldpb.ToolCallRequest) (outcome, bool) {
	by, err := s.startedBy(ctx, req.GetSessionId(), req.GetCallId())
	if err != nil || by == "" {
		return outcome{}, false
	}
	return outcome{status: statusUnknown, content: fmt.Sprintf(
		"outcome unknown: the runner running this %s call (%s) stopped before it reported a result, so it may or may not have taken effect; check before re-running it", req.GetTool(), by)}, true
}

// execute runs the tool within its concurrency limit, after a checkpoint
// when it changes files.
func (s *Service) execute(ctx context.Context, c *call) outcome {
	release, err := s.limits.acquire(ctx, c.spec.Name)
	if err != nil {
		return interrupted(c, err)
	}
	defer release()
	if mutatesFiles(c.spec.Name) {
		s.checkpoint(c)
	}
	if !c.spec.Idempotent {
		if err := s.markStarted(ctx, c); err != nil {
			return failed(fmt.Errorf("the runner could not record the call's start, so it was not run: %w", err))
		}
	}
	s.event(c.req, proto.EventToolStarted, "")
	return settled(ctx, c, c.run(ctx, c))
}

// settled is o, the outcome of c's run, unless the runner stopped while it
// ran: then whether it took effect is unknown.
func settled(ctx context.Context, c *call, o outcome) outcome {
	if ctx.Err() != nil && o.status != statusOK {
		return interrupted(c, ctx.Err())
	}
	return o
}

func interrupted(c *call, err error) outcome {
	return outcome{status: statusUnknown, content: fmt.Sprintf(
		"outcome unknown: the tool runner stopped while running this %s call (%v); check before re-running it", c.spec.Name, err)}
}

// finish removes the provider keys, truncates, counts the outcome against the breaker and publishes it.
func (s *Service) finish(ctx context.Context, req *heraldpb.ToolCallRequest, o outcome, took time.Duration, streak func() failureStreak) (*heraldpb.ToolResult, error) {
	o.content = s.secrets.scrub(o.content)
	if req.GetTool() != "terminal" {
		o.content = truncateHeadTail(o.content, s.cfg.MaxResultChars)
	}
	s.recordOutcome(ctx, req, o, streak())
	telemetry.EndTool(ctx, req.GetTool(), o.status, o.content, s.runner, took)
	// Publishing must survive the runner stopping, or the work is lost.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	res := &heraldpb.ToolResult{CallId: req.GetCallId(), SessionId: req.GetSessionId(), Step: req.GetStep(),
		Tool: req.GetTool(), Content: o.content, IsError: o.isError(), Status: o.status,
		DurationMs: took.Milliseconds(), Runner: s.runner, CallDigest: callDigest(req)}
	// The event goes first, on the connection the result then takes: the
	// loop sends the next call only once it has the result, so a watcher
	// sees this call finish before any call that waited for it starts.
	s.event(req, proto.EventToolFinished, o.status)
	if err := bus.PublishProto(pctx, s.deps.JS, bus.ToolResult(req.GetSessionId(), req.GetCallId()),
		req.GetSessionId()+":"+req.GetCallId(), res); err != nil {
		return nil, fmt.Errorf("publish result of %s: %w", req.GetCallId(), err)
	}
	s.toolEvent(pctx, req, o, took)
	if o.isError() {
		s.log.Debug().Str("session_id", req.GetSessionId()).Str("call_id", req.GetCallId()).
			Str("tool", req.GetTool()).Str("status", o.status).Msg("tool call failed")
	}
	return res, nil
}
