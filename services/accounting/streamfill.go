package accounting

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// fillLevels are the fractions of a stream's byte limit at which a warning
// is logged once as the stream fills (events wait there while ClickHouse is
// away; at 100% the stream refuses new usage events).
var fillLevels = []float64{0.5, 0.8, 0.95}

// watchFill checks the stream's fill every interval until ctx ends, warning
// once per level crossed upwards and once when it drains below the first.
func watchFill(ctx context.Context, js jetstream.JetStream, stream string, every time.Duration, log zerolog.Logger) {
	log = log.With().Str("stream", stream).Logger()
	level := 0
	for {
		level = checkFill(ctx, js, stream, level, log)
		if !sleep(ctx, every) {
			return
		}
	}
}

func checkFill(ctx context.Context, js jetstream.JetStream, stream string, level int, log zerolog.Logger) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return level
	}
	info, err := s.Info(ctx)
	if err != nil || info.Config.MaxBytes <= 0 {
		return level
	}
	fill := float64(info.State.Bytes) / float64(info.Config.MaxBytes)
	next := 0
	for i, l := range fillLevels {
		if fill >= l {
			next = i + 1
		}
	}
	switch {
	case next > level:
		log.Warn().Float64("fill", fill).Uint64("messages", info.State.Msgs).Uint64("bytes", info.State.Bytes).
			Int64("max_bytes", info.Config.MaxBytes).
			Msg("usage stream is filling up: events are waiting for ClickHouse; when full, new events are refused")
	case next == 0 && level > 0:
		log.Info().Float64("fill", fill).Msg("usage stream drained")
	}
	return next
}
