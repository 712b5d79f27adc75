package bus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// A work-queue stream deletes a message when it is acknowledged. When that
// leaves the stream's last block file with no message, the file store
// starts a new block file and writes a tombstone into it (an open, a write
// and the old file's unlink), on every acknowledgement of a session that
// runs alone: a publish, pull and acknowledgement cost 470 µs of CPU that
// way against 97 µs when the last block still holds a message
// (docs/BENCHMARKS.md, "Work-queue anchors"). So each work-queue stream
// carries an anchor: a small message on a subject of its own, which no
// consumer's filter takes, published by the stream's workers every
// AnchorEvery with a time to live of AnchorTTL, so that the newest block
// always holds one. An anchor is never delivered and expires on its own;
// it costs one small publish per stream and worker every AnchorEvery.

// AnchorEvery is how often a worker renews its stream's anchor; AnchorTTL is
// how long each anchor lives, long enough to overlap the next.
const (
	AnchorEvery = 20 * time.Second
	AnchorTTL   = time.Minute
)

// AnchoredStreams are the work-queue streams that carry an anchor.
var AnchoredStreams = []string{StreamTasks, StreamLLMRequests, StreamToolCalls, StreamCompress, StreamUsage, StreamToolEvents}

// AnchorSubject is the subject of stream's anchor.
func AnchorSubject(stream string) string { return "herald.anchor." + stream }

// KeepAnchor publishes stream's anchor now and every AnchorEvery until the
// returned stop is called; for a stream without an anchor it does nothing.
// A failed publish (a server declared by an older version, a user without
// the right) costs CPU, not correctness: it is logged once and tried again.
func KeepAnchor(js jetstream.JetStream, stream string, log zerolog.Logger) (stop func()) {
	if !slices.Contains(AnchoredStreams, stream) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		warned := false
		tick := time.NewTicker(AnchorEvery)
		defer tick.Stop()
		for {
			if err := publishAnchor(ctx, js, stream); err != nil && ctx.Err() == nil && !warned {
				warned = true
				log.Warn().Err(err).Str("stream", stream).
					Msg("cannot keep the stream's anchor; work still flows, at a higher CPU cost per message (run herald declare)")
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func publishAnchor(ctx context.Context, js jetstream.JetStream, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, AnchorSubject(stream), nil, jetstream.WithMsgTTL(AnchorTTL)); err != nil {
		return fmt.Errorf("anchor of %s: %w", stream, err)
	}
	return nil
}

// PendingWork is how many messages of a work-queue stream wait to be done:
// its messages but the anchors.
func PendingWork(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(AnchorSubject(stream)))
	if err != nil {
		return 0, err
	}
	anchors := info.State.Subjects[AnchorSubject(stream)]
	return info.State.Msgs - min(anchors, info.State.Msgs), nil
}
