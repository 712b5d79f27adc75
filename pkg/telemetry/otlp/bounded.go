package otlp

import (
	"context"
	"sync/atomic"

	"github.com/heraldrun/herald/pkg/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// boundedProcessor hands ended spans to the batch processor only while
// fewer than limit are queued or being exported. The batch processor's own
// queue therefore never overflows, and every span given up on is counted
// here, where the SDK would drop it silently.
type boundedProcessor struct {
	next     sdktrace.SpanProcessor
	limit    int64
	inflight *atomic.Int64
}

func (p *boundedProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	p.next.OnStart(ctx, s)
}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor exports sampled spans only
	}
	if p.inflight.Add(1) > p.limit {
		p.inflight.Add(-1)
		telemetry.SpansDropped(1)
		return
	}
	p.next.OnEnd(s)
}

func (p *boundedProcessor) Shutdown(ctx context.Context) error   { return p.next.Shutdown(ctx) }
func (p *boundedProcessor) ForceFlush(ctx context.Context) error { return p.next.ForceFlush(ctx) }

// countingExporter counts what the collector took and releases the spans'
// places in the queue whatever became of them.
type countingExporter struct {
	next     sdktrace.SpanExporter
	inflight atomic.Int64
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.next.ExportSpans(ctx, spans)
	e.inflight.Add(-int64(len(spans)))
	if err != nil {
		telemetry.ExportFailed()
		return err
	}
	telemetry.SpansExported(len(spans))
	return nil
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }
