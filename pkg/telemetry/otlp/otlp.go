// Package otlp installs the OpenTelemetry SDK that exports Herald's spans
// over OTLP, configured by the standard OTEL_* environment variables. Only
// the herald binary imports it: the SDK and its exporters stay out of the
// services, which use the API through package telemetry.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// defaultQueue is the span queue when OTEL_BSP_MAX_QUEUE_SIZE is unset (the
// SDK's own default).
const defaultQueue = 2048

// ErrProtocol is an OTEL_EXPORTER_OTLP_PROTOCOL this build cannot speak.
var ErrProtocol = errors.New("unsupported OTLP protocol")

// Enabled says whether the environment asks for spans to be exported: an
// OTLP endpoint is set and the SDK is not disabled.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Start installs the SDK when Enabled, naming the process serviceName
// unless OTEL_SERVICE_NAME says otherwise, and returns what flushes and
// stops it; with tracing off it installs nothing. Spans are batched behind a
// bounded queue: an unreachable or slow collector makes spans drop (counted
// in herald_trace_spans_dropped_total), never makes a caller wait.
func Start(ctx context.Context, serviceName string, log zerolog.Logger) (shutdown func(context.Context) error, err error) {
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := exporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	queue := envInt("OTEL_BSP_MAX_QUEUE_SIZE", defaultQueue)
	counted := &countingExporter{next: exp}
	bsp := sdktrace.NewBatchSpanProcessor(counted, sdktrace.WithMaxQueueSize(queue))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(telemetry.IDGenerator{}),
		sdktrace.WithSpanProcessor(&boundedProcessor{next: bsp, limit: int64(queue), inflight: &counted.inflight}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Debug().Err(err).Msg("span export failed") // counted in herald_trace_export_failures_total
	}))
	telemetry.SetEnabled(true)
	log.Info().Str("service_name", serviceName).Str("protocol", protocol()).Msg("exporting traces over OTLP")
	return func(ctx context.Context) error {
		telemetry.SetEnabled(false)
		return tp.Shutdown(ctx)
	}, nil
}

func protocol() string {
	p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p == "" {
		p = "http/protobuf"
	}
	return p
}

// exporter is the OTLP exporter the protocol names; the exporters read the
// endpoint, headers, timeout and TLS variables themselves.
func exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch p := protocol(); p {
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w %q (OTEL_EXPORTER_OTLP_PROTOCOL): use http/protobuf or grpc", ErrProtocol, p)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
