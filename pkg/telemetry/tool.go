package telemetry

import (
	"context"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// maxToolContent bounds recorded tool arguments and results.
const maxToolContent = 8 << 10

// StartTool begins the `execute_tool {tool}` span of one tool call.
func StartTool(ctx context.Context, req *heraldpb.ToolCallRequest) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noopSpan
	}
	ctx, span := start(ctx, "execute_tool "+req.GetTool(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", req.GetTool()),
		attribute.String("gen_ai.tool.call.id", req.GetCallId()),
		attribute.String("gen_ai.tool.type", "function"),
		attribute.String("gen_ai.conversation.id", req.GetSessionId()),
		attribute.Int("herald.step", int(req.GetStep())),
	))
	if CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", Truncate(req.GetArguments(), maxToolContent)))
	}
	return ctx, span
}

// EndTool ends the tool call's span started in ctx and counts the run.
// status is the result's status ("ok" or why not); result is recorded only
// when content capture is on.
func EndTool(ctx context.Context, tool, status, result, runner string, took time.Duration) {
	metrics.toolRuns.WithLabelValues(tool, status).Inc()
	metrics.toolDuration.WithLabelValues(tool).Observe(took.Seconds())
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("herald.tool.status", status), attribute.String("herald.runner", runner))
	if CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.tool.call.result", Truncate(result, maxToolContent)))
	}
	if status != "ok" {
		span.SetAttributes(attribute.String("error.type", status))
		span.SetStatus(codes.Error, "tool call "+status)
	}
	span.End()
}

// StartCompress begins the span of one history compression.
func StartCompress(ctx context.Context, req *heraldpb.CompressRequest) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noopSpan
	}
	return start(ctx, "compress_context", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("gen_ai.conversation.id", req.GetSessionId()),
		attribute.String("herald.compress.reason", req.GetReason()),
		attribute.Int("herald.compress.messages_before", len(req.GetMessages())),
	))
}

// EndCompress ends the compression's span with what it saved.
func EndCompress(span trace.Span, tokensBefore, tokensAfter int64, pruned int, summarized bool, summaryErr error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int64("herald.compress.tokens_before", tokensBefore),
		attribute.Int64("herald.compress.tokens_after", tokensAfter),
		attribute.Int("herald.compress.pruned_tool_outputs", pruned),
		attribute.Bool("herald.compress.summarized", summarized))
	if summaryErr != nil {
		span.AddEvent("summary_unavailable", trace.WithAttributes(attribute.String("error.message", summaryErr.Error())))
	}
	span.End()
}
