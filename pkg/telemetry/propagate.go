package telemetry

import (
	"context"
	"net/textproto"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// w3c reads and writes the traceparent and tracestate headers. It is used
// directly, not through the global propagator, so a process that exports no
// spans still passes on the trace it was handed.
var w3c propagation.TraceContext

// headerCarrier adapts NATS headers, whose keys are case-sensitive, to the
// propagator: keys are written lowercase as W3C spells them, and read in
// either that or the canonical HTTP form another client may have used.
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	return nats.Header(c).Get(textproto.CanonicalMIMEHeaderKey(key))
}

func (c headerCarrier) Set(key, value string) { nats.Header(c)[key] = []string{value} }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes ctx's span context into h as W3C trace context. Nothing is
// written when ctx carries no span.
func Inject(ctx context.Context, h nats.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, headerCarrier(h))
}

// HasTrace says whether ctx carries a span context to pass on.
func HasTrace(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }

// Extract returns ctx with the remote span context found in h, or ctx as
// it is when h carries none.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 || headerCarrier(h).Get(headerTraceparent) == "" {
		return ctx
	}
	return w3c.Extract(ctx, headerCarrier(h))
}

const headerTraceparent = "traceparent"

// Traceparent is ctx's span context in W3C form ("" when there is none).
func Traceparent(ctx context.Context) string {
	if !HasTrace(ctx) {
		return ""
	}
	h := nats.Header{}
	w3c.Inject(ctx, headerCarrier(h))
	return h.Get(headerTraceparent)
}

// WithTraceparent returns ctx carrying the remote span context tp names;
// ctx as it is when tp is empty or malformed.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return w3c.Extract(ctx, headerCarrier(nats.Header{headerTraceparent: []string{tp}}))
}
