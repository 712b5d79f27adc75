package app

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/loop"
	"github.com/nats-io/nats.go/jetstream"
)

// traceFlushTimeout bounds how long a stopping process waits for its last
// spans to reach the collector: an unreachable one must not hold it up.
const traceFlushTimeout = 2 * time.Second

// traceServiceName is service.name when OTEL_SERVICE_NAME is unset: "herald"
// for a process running every service, else "herald-" and the ones it runs.
func traceServiceName(names []string) string {
	if len(names) == len(service.Names) {
		return "herald"
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	return "herald-" + strings.Join(slices.Compact(sorted), "-")
}

func (a *App) flushTraces(ctx context.Context) {
	if a.stopTraces == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
	defer cancel()
	if err := a.stopTraces(ctx); err != nil {
		a.log.Debug().Err(err).Msg("last spans not exported")
	}
	a.stopTraces = nil
}

// Transcripts reads session transcripts for the dashboard's trace page.
func Transcripts(js jetstream.JetStream) accounting.Transcripts {
	return func(ctx context.Context, sid string) ([]*heraldpb.TranscriptEntry, error) {
		_, entries, err := loop.SessionTranscript(ctx, js, sid)
		return entries, err
	}
}
