package telemetry

import (
	"net/http"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// registry holds every metric of this process; Handler serves it.
var registry = prometheus.NewRegistry()

// metrics are Herald's Prometheus metrics; README.md lists each one.
var metrics = struct {
	modelCalls, modelErrors, modelTokens *prometheus.CounterVec
	modelDuration, firstToken            *prometheus.HistogramVec
	retries, fallbacks, spend            *prometheus.CounterVec
	toolRuns                             *prometheus.CounterVec
	toolDuration                         *prometheus.HistogramVec
	turnsStarted                         prometheus.Counter
	turnsFinished                        *prometheus.CounterVec
	sessionsActive                       prometheus.Gauge
	deadLetters                          *prometheus.CounterVec
	spansExported, spansDropped          prometheus.Counter
	exportFailures                       prometheus.Counter
}{
	modelCalls:  counter("herald_model_calls_total", "Provider attempts (each retry and fallback is one), by outcome.", "provider", "model", "status"),
	modelErrors: counter("herald_model_errors_total", "Failed provider attempts by error class.", "provider", "model", "error_class"),
	modelTokens: counter("herald_model_tokens_total", "Tokens of provider attempts by class (input is uncached input).", "provider", "model", "type"),
	modelDuration: histogram("herald_model_call_duration_seconds", "Duration of one provider attempt.",
		[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160}, "provider", "model"),
	firstToken: histogram("herald_model_time_to_first_token_seconds", "Time from the start of a streamed attempt to its first text.",
		[]float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20}, "provider", "model"),
	retries:   counter("herald_model_retries_total", "Retries of a model call on the same provider, by the error class that caused them.", "provider", "error_class"),
	fallbacks: counter("herald_model_fallbacks_total", "Switches to the next provider of the fallback chain, by the provider left and the error class.", "provider", "error_class"),
	spend:     counter("herald_spend_usd_total", "Money spent on model calls, by tenant (USD, from the price table).", "tenant"),
	toolRuns:  counter("herald_tool_runs_total", "Tool calls answered, by tool and result status.", "tool", "status"),
	toolDuration: histogram("herald_tool_run_duration_seconds", "Duration of one tool call.",
		[]float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300}, "tool"),
	turnsStarted:   prometheus.NewCounter(prometheus.CounterOpts{Name: "herald_turns_started_total", Help: "Turns started by this process's loop."}),
	turnsFinished:  counter("herald_turns_finished_total", "Turns finished by this process's loop, by exit reason.", "exit_reason"),
	sessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "herald_sessions_active", Help: "Turns started minus turns finished by this process's loop; summed over every loop process it is the sessions in a turn."}),
	deadLetters:    counter("herald_dead_letters_total", "Messages dead-lettered, by the stream they came from.", "stream"),
	spansExported:  prometheus.NewCounter(prometheus.CounterOpts{Name: "herald_trace_spans_exported_total", Help: "Spans sent to the OTLP collector."}),
	spansDropped:   prometheus.NewCounter(prometheus.CounterOpts{Name: "herald_trace_spans_dropped_total", Help: "Spans dropped because the export queue was full (a slow or unreachable collector)."}),
	exportFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "herald_trace_export_failures_total", Help: "Span batches the collector did not take."}),
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

func init() {
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.modelCalls, metrics.modelErrors, metrics.modelTokens, metrics.modelDuration, metrics.firstToken,
		metrics.retries, metrics.fallbacks, metrics.spend, metrics.toolRuns, metrics.toolDuration,
		metrics.turnsStarted, metrics.turnsFinished, metrics.sessionsActive, metrics.deadLetters,
		metrics.spansExported, metrics.spansDropped, metrics.exportFailures, consumers)
}

// Handler serves this process's metrics in the Prometheus text format.
func Handler() http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ModelAttempt counts one provider attempt: its outcome, duration, tokens
// and cost (nano-USD, spent by tenant). errorClass is empty on success.
func ModelAttempt(provider, model, errorClass, tenant string, took time.Duration, u *heraldpb.Usage, costNano uint64) {
	status := "ok"
	if errorClass != "" {
		status = "error"
		metrics.modelErrors.WithLabelValues(provider, model, errorClass).Inc()
	}
	metrics.modelCalls.WithLabelValues(provider, model, status).Inc()
	metrics.modelDuration.WithLabelValues(provider, model).Observe(took.Seconds())
	addTokens(provider, model, "input", u.GetInputTokens())
	addTokens(provider, model, "output", u.GetOutputTokens())
	addTokens(provider, model, "cache_read", u.GetCacheReadTokens())
	addTokens(provider, model, "cache_write", u.GetCacheWriteTokens())
	addTokens(provider, model, "reasoning", u.GetReasoningTokens())
	if costNano > 0 {
		metrics.spend.WithLabelValues(tenant).Add(float64(costNano) / 1e9)
	}
}

func addTokens(provider, model, typ string, n int64) {
	if n > 0 {
		metrics.modelTokens.WithLabelValues(provider, model, typ).Add(float64(n))
	}
}

// TurnStarted and TurnFinished count turns and keep herald_sessions_active.
func TurnStarted() {
	metrics.turnsStarted.Inc()
	metrics.sessionsActive.Inc()
}

// TurnFinished counts a turn that ended with exitReason.
func TurnFinished(exitReason string) {
	metrics.turnsFinished.WithLabelValues(exitReason).Inc()
	metrics.sessionsActive.Dec()
}

// DeadLettered counts a message dead-lettered from stream.
func DeadLettered(stream string) { metrics.deadLetters.WithLabelValues(stream).Inc() }

// SpansExported, SpansDropped and ExportFailed count what became of spans.
func SpansExported(n int) { metrics.spansExported.Add(float64(n)) }

// SpansDropped counts spans given up on because the export queue was full.
func SpansDropped(n int) { metrics.spansDropped.Add(float64(n)) }

// ExportFailed counts a span batch the collector did not take.
func ExportFailed() { metrics.exportFailures.Inc() }

// FirstTokenTimer times a streamed attempt from its start to its first text.
type FirstTokenTimer struct {
	provider, model string
	started         time.Time
}

// StartFirstToken starts timing an attempt on provider and model.
func StartFirstToken(provider, model string) FirstTokenTimer {
	return FirstTokenTimer{provider: provider, model: model, started: time.Now()}
}

// Shown observes the first text of the attempt; later calls do nothing.
func (t *FirstTokenTimer) Shown() {
	if t.started.IsZero() {
		return
	}
	metrics.firstToken.WithLabelValues(t.provider, t.model).Observe(time.Since(t.started).Seconds())
	t.started = time.Time{}
}
