package otlp_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/pkg/telemetry/otlp"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// blackhole accepts connections and never answers on them: a collector
// that hangs every export.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestAHangingCollectorNeverHoldsUpTheCaller(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+blackhole(t))
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60000") // a waiting caller would wait a minute
			t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
			shutdown, err := otlp.Start(context.Background(), "blackhole-test", zerolog.Nop())
			require.NoError(t, err)
			require.True(t, telemetry.Enabled())
			dropped := counter(t, "herald_trace_spans_dropped_total")

			const spans = 2000
			done := make(chan struct{})
			go func() {
				defer close(done)
				req := &heraldpb.ToolCallRequest{Tool: "terminal", CallId: "c1", SessionId: "s1"}
				for range spans {
					ctx, _ := telemetry.StartTool(context.Background(), req)
					telemetry.EndTool(ctx, "terminal", "ok", "", "r1", time.Millisecond)
				}
			}()
			require.Eventually(t, func() bool {
				select {
				case <-done:
					return true
				default:
					return false
				}
			}, 10*time.Second, 5*time.Millisecond, "ending spans waited for the collector")
			require.GreaterOrEqual(t, counter(t, "herald_trace_spans_dropped_total")-dropped, float64(spans-100),
				"spans past the queue's 100 are dropped and counted")

			stopped := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				stopped <- shutdown(ctx)
			}()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("shutdown waited for the collector past its deadline")
			}
			require.False(t, telemetry.Enabled())
		})
	}
}

func TestNoEndpointInstallsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := otlp.Start(context.Background(), "off", zerolog.Nop())
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	require.False(t, telemetry.Enabled())
	ctx, span := telemetry.StartTool(context.Background(), &heraldpb.ToolCallRequest{Tool: "terminal"})
	require.False(t, span.IsRecording())
	require.False(t, telemetry.HasTrace(ctx), "no trace context to pass on")
}

func TestUnknownProtocolIsRefusedAtStart(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err := otlp.Start(context.Background(), "x", zerolog.Nop())
	require.ErrorIs(t, err, otlp.ErrProtocol)
	require.False(t, telemetry.Enabled())
}

func counter(t *testing.T, name string) float64 {
	rec := httptest.NewRecorder()
	telemetry.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("%s not in the scrape", name)
	return 0
}
