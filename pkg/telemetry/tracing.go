package telemetry

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every Herald span.
const ScopeName = "github.com/heraldrun/herald"

// enabled is set once an SDK that exports spans is installed (package
// otlp); until then the helpers return at once.
var enabled atomic.Bool

// SetEnabled tells the helpers whether spans are exported. Package otlp
// calls it; tests that install their own provider may too.
func SetEnabled(on bool) { enabled.Store(on) }

// Enabled says whether spans are exported by this process.
func Enabled() bool { return enabled.Load() }

var noopSpan = noop.Span{}

// start begins a span under ctx when tracing is on; otherwise it returns
// ctx as it is and a no-op span.
func start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noopSpan
	}
	return otel.Tracer(ScopeName).Start(ctx, name, opts...)
}

// CaptureContent says whether message contents, tool arguments and tool
// results may be recorded on spans, as the GenAI conventions' opt-in
// variable asks (off unless it is "true"). Only asked while tracing is on.
func CaptureContent() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")), "true")
}

// chosenIDs are the ids a span started under WithIDs gets.
type chosenIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

type idsKey struct{}

// withIDs makes the next span started under ctx take these ids. A turn's
// span is recorded when the turn ends, possibly by another process than the
// one that started it; the ids chosen at its start (and already used as
// its children's parent) must be the ones it is recorded with.
func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, chosenIDs{trace: tid, span: sid})
}

// IDGenerator is the SDK id generator Herald installs: random ids, except
// for a span started under withIDs.
type IDGenerator struct{}

// NewIDs returns the ids of a new root span.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if ids, ok := ctx.Value(idsKey{}).(chosenIDs); ok {
		return ids.trace, ids.span
	}
	return newTraceID(), newSpanID()
}

// NewSpanID returns the id of a new span in trace tid.
func (IDGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if ids, ok := ctx.Value(idsKey{}).(chosenIDs); ok && ids.trace == tid {
		return ids.span
	}
	return newSpanID()
}

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		a := rand.Uint64()
		for i := range 8 {
			id[i] = byte(a >> (8 * i))
		}
	}
	return id
}
