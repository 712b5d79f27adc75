package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
)

// BenchmarkStepInstrumentation is one agent step's instrumentation as the
// services run it (tracing off, the default): five publishes and consumes
// carrying trace context, three loop transitions, a model call's span and
// metrics, a tool call's span and metrics. Run it with
// go test -run '^$' -bench StepInstrumentation ./pkg/telemetry/
func BenchmarkStepInstrumentation(b *testing.B) {
	req := &heraldpb.LLMRequest{RequestId: "s1:1:1:0", SessionId: "s1", Model: "m", Stream: true}
	resp := &heraldpb.LLMResponse{Provider: "openai", Model: "m", Usage: &heraldpb.Usage{InputTokens: 100, OutputTokens: 10}, FinishReason: "tool_calls"}
	call := &heraldpb.ToolCallRequest{CallId: "t1s1c0", SessionId: "s1", Tool: "read_file"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for range 3 {
			_ = telemetry.WithTraceparent(ctx, "")
		}
		for range 5 {
			h := nats.Header{}
			telemetry.Inject(ctx, h)
			_ = telemetry.Extract(ctx, h)
		}
		cctx, span := telemetry.StartChat(ctx, req)
		ft := telemetry.StartFirstToken("openai", "m")
		ft.Shown()
		telemetry.ModelAttempt("openai", "m", "", "acme", time.Millisecond, resp.Usage, 1000)
		telemetry.EndChat(span, resp)
		tctx, _ := telemetry.StartTool(cctx, call)
		telemetry.EndTool(tctx, "read_file", "ok", "", "r1", time.Millisecond)
	}
}
