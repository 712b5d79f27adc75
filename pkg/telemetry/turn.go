package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// AgentName is gen_ai.agent.name of a turn; a delegated child's turn is
// SubagentName.
const (
	AgentName    = "herald"
	SubagentName = "herald-subagent"
)

// NewTurn picks the ids of a turn starting now, under the trace ctx carries
// (a task published with a traceparent, or a parent agent's turn) or a new
// one. It returns the turn's span as a traceparent, which the loop keeps in
// the session's state so every transition of the turn, on any loop
// process, parents its work to it, and the span id of its parent ("" for a
// root). Both are empty when tracing is off.
func NewTurn(ctx context.Context) (traceparent, parent string) {
	if !Enabled() {
		return "", ""
	}
	up := trace.SpanContextFromContext(ctx)
	tid := up.TraceID()
	if !up.IsValid() {
		tid = newTraceID()
	} else {
		parent = up.SpanID().String()
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled})
	return Traceparent(trace.ContextWithRemoteSpanContext(context.Background(), sc)), parent
}

// Turn is a finished turn as its span records it.
type Turn struct {
	Traceparent, Parent string
	Started             time.Time
	SessionID, TaskID   string
	ParentSessionID     string
	Tenant, Model       string
	ExitReason, Error   string
	Iterations          int
	APICalls            int
	InputTokens         int64 // all input classes
	OutputTokens        int64
	CostUSD             float64
}

// EndTurn records the turn's `invoke_agent` span from its start to now,
// with the ids NewTurn chose.
func EndTurn(t Turn) {
	if !Enabled() || t.Traceparent == "" {
		return
	}
	sc := trace.SpanContextFromContext(WithTraceparent(context.Background(), t.Traceparent))
	if !sc.IsValid() {
		return
	}
	ctx := context.Background()
	if t.Parent != "" {
		if psid, err := trace.SpanIDFromHex(t.Parent); err == nil {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc.WithSpanID(psid))
		}
	}
	ctx = withIDs(ctx, sc.TraceID(), sc.SpanID())
	agent := AgentName
	if t.ParentSessionID != "" {
		agent = SubagentName
	}
	_, span := start(ctx, "invoke_agent "+agent, trace.WithTimestamp(t.Started), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", agent),
			attribute.String("gen_ai.conversation.id", t.SessionID),
			attribute.String("gen_ai.request.model", t.Model),
			attribute.String("herald.task_id", t.TaskID),
			attribute.String("herald.tenant", t.Tenant),
			attribute.String("herald.exit_reason", t.ExitReason),
			attribute.Int("herald.iterations", t.Iterations),
			attribute.Int("herald.api_calls", t.APICalls),
			attribute.Int64("gen_ai.usage.input_tokens", t.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", t.OutputTokens),
			attribute.Float64("herald.cost_usd", t.CostUSD),
		))
	if t.ParentSessionID != "" {
		span.SetAttributes(attribute.String("herald.parent_session_id", t.ParentSessionID))
	}
	if t.ExitReason != "text_response" {
		span.SetAttributes(attribute.String("error.type", t.ExitReason))
		span.SetStatus(codes.Error, t.Error)
	}
	span.End()
}
