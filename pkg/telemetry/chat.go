package telemetry

import (
	"context"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// StartChat begins the `chat {model}` span of one model call, which covers
// every attempt on every provider the call tries.
func StartChat(ctx context.Context, req *heraldpb.LLMRequest) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noopSpan
	}
	ctx, span := start(ctx, "chat "+req.GetModel(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", req.GetModel()),
		attribute.String("gen_ai.conversation.id", req.GetSessionId()),
		attribute.Bool("gen_ai.request.stream", req.GetStream()),
		attribute.String("herald.request_id", req.GetRequestId()),
		attribute.String("herald.purpose", purposeOf(req.GetPurpose())),
		attribute.Int("herald.step", int(req.GetStep())),
	))
	if req.GetMaxOutputTokens() > 0 {
		span.SetAttributes(attribute.Int("gen_ai.request.max_tokens", int(req.GetMaxOutputTokens())))
	}
	if CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.input.messages", inputMessages(req.GetMessages())))
	}
	return ctx, span
}

// EndChat ends the model call's span with what the call came to: the
// provider that answered (or failed last), tokens counted the way the
// conventions count them (input includes cached input), finish reason, and
// the error class of a failed call.
func EndChat(span trace.Span, resp *heraldpb.LLMResponse) {
	if !span.IsRecording() {
		return
	}
	u := resp.GetUsage()
	span.SetAttributes(
		attribute.String("gen_ai.provider.name", resp.GetProvider()),
		attribute.String("gen_ai.response.model", resp.GetModel()),
		attribute.Int64("gen_ai.usage.input_tokens", u.GetInputTokens()+u.GetCacheReadTokens()+u.GetCacheWriteTokens()),
		attribute.Int64("gen_ai.usage.output_tokens", u.GetOutputTokens()),
		attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.GetCacheReadTokens()),
		attribute.Int64("gen_ai.usage.cache_creation.input_tokens", u.GetCacheWriteTokens()),
		attribute.Int64("gen_ai.usage.reasoning.output_tokens", u.GetReasoningTokens()),
		attribute.Float64("herald.cost_usd", resp.GetCostUsd()),
		attribute.Int("herald.attempts", int(resp.GetAttempts())),
		attribute.Bool("herald.is_fallback", resp.GetIsFallback()),
		attribute.String("herald.api_mode", resp.GetApiMode()),
	)
	if fr := resp.GetFinishReason(); fr != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{fr}))
	}
	if resp.GetError() != "" {
		span.SetAttributes(attribute.String("error.type", resp.GetErrorClass()))
		span.SetStatus(codes.Error, resp.GetError())
	} else if CaptureContent() && resp.GetMessage() != nil {
		span.SetAttributes(attribute.String("gen_ai.output.messages", outputMessages(resp.GetMessage(), resp.GetFinishReason())))
	}
	span.End()
}

// ModelRetry marks a retry on the call's span and counts it.
func ModelRetry(ctx context.Context, provider, model, errorClass string, attempt int, wait time.Duration) {
	metrics.retries.WithLabelValues(provider, errorClass).Inc()
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("retry", trace.WithAttributes(attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", model), attribute.String("error.type", errorClass),
		attribute.Int("herald.attempt", attempt), attribute.Float64("herald.wait_seconds", wait.Seconds())))
}

// ModelFallback marks a switch to the next provider on the call's span and
// counts it under the provider given up on.
func ModelFallback(ctx context.Context, from, to, errorClass string) {
	metrics.fallbacks.WithLabelValues(from, errorClass).Inc()
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("fallback", trace.WithAttributes(attribute.String("herald.from_provider", from),
		attribute.String("herald.to_provider", to), attribute.String("error.type", errorClass)))
}

func purposeOf(p string) string {
	if p == "" {
		return "agent"
	}
	return p
}
