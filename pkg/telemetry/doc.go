// Package telemetry is how Herald is seen from outside: OpenTelemetry spans
// named and shaped as the GenAI semantic conventions describe agents, W3C
// trace context carried in NATS message headers (pkg/bus injects and
// extracts it, so every service joins the same trace), and the Prometheus
// metrics every process exposes on /metrics.
//
// It depends on the OpenTelemetry API only: with no SDK installed (no
// OTEL_EXPORTER_OTLP_* variable set, see package otlp) every span is the
// API's no-op and costs a context lookup. It must not know any service's
// logic: services call one helper where a span starts and one where it ends.
package telemetry
