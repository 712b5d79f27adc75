package bus_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// A span context published with a message is the handler's parent, however
// the message was published: one at a time, in a batch, or claim-checked.
func TestTraceContextTravelsWithMessages(t *testing.T) {
	b := heraldtest.StartBus(t)
	got := make(chan trace.SpanContext, 8)
	startWorker(t, b, func(ctx context.Context, m jetstream.Msg) error {
		got <- trace.SpanContextFromContext(ctx)
		return nil
	})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "one", []byte("{}")))
	batch := bus.NewBatch(b.JS)
	batch.Add(ctx, bus.TasksSubject, "two", []byte("{}"))
	require.NoError(t, batch.Wait(ctx))
	huge := strings.Repeat("x", 9<<20) // over the server's max payload: claim-checked
	require.NoError(t, bus.Publish(ctx, b.JS, bus.TasksSubject, "three", []byte(huge)))
	for range 3 {
		select {
		case remote := <-got:
			require.Equal(t, sc.TraceID(), remote.TraceID())
			require.Equal(t, sc.SpanID(), remote.SpanID())
			require.True(t, remote.IsRemote())
		case <-time.After(10 * time.Second):
			t.Fatal("a message never reached the handler")
		}
	}

	require.NoError(t, bus.Publish(context.Background(), b.JS, bus.TasksSubject, "four", []byte("{}")))
	select {
	case remote := <-got:
		require.False(t, remote.IsValid(), "a message published outside any trace starts none")
	case <-time.After(10 * time.Second):
		t.Fatal("a message never reached the handler")
	}
}

// Dead letters are counted by stream on /metrics.
func TestDeadLettersAreCountedByStream(t *testing.T) {
	b := heraldtest.StartBus(t)
	before := metricValue(t, `herald_dead_letters_total{stream="TASKS"}`)
	startWorker(t, b, func(ctx context.Context, m jetstream.Msg) error { return bus.Permanent(context.Canceled) })
	require.NoError(t, bus.Publish(context.Background(), b.JS, bus.TasksSubject, "", []byte("bad")))
	require.Eventually(t, func() bool {
		return metricValue(t, `herald_dead_letters_total{stream="TASKS"}`) == before+1
	}, 5*time.Second, 10*time.Millisecond)
	require.Contains(t, scrapeMetrics(t), `herald_consumer_pending_messages{consumer="test",stream="TASKS"} 0`)
}

func scrapeMetrics(t *testing.T) string {
	rec := httptest.NewRecorder()
	telemetry.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// metricValue is the value of one series in the scrape (0 when absent).
func metricValue(t *testing.T, series string) float64 {
	for _, line := range strings.Split(scrapeMetrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}
