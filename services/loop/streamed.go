package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// streamedReadTimeout bounds reading back what a call streamed; past it the
// answer is handled as if nothing had been streamed.
const streamedReadTimeout = 2 * time.Second

// unusable reports whether a model response holds no answer of its own: a
// failed call (other than one the user interrupted, whose output is
// discarded) or an empty message.
func unusable(resp *heraldpb.LLMResponse) bool {
	if resp.Error != "" {
		return resp.ErrorClass != "interrupted"
	}
	m := resp.Message
	return strings.TrimSpace(m.GetContent()) == "" && len(m.GetToolCalls()) == 0
}

// streamedText is the text the gateway streamed to the session's watchers
// for one model request, from its last attempt (a retry or a switch to the
// fallback streams the answer anew). It is what the user has already seen
// when the response itself came back empty or failed. Deltas travel on the
// EVENTS stream only, so they are read back from there, starting at the
// turn's start (a time on the server's clock).
func (s *Service) streamedText(ctx context.Context, sid, requestID string, since time.Time) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, streamedReadTimeout)
	defer cancel()
	cons, err := s.deps.JS.CreateConsumer(ctx, bus.StreamEvents, jetstream.ConsumerConfig{
		FilterSubject: bus.SessionEvents(sid), DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &since, AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return "", fmt.Errorf("read back streamed text: %w", err)
	}
	defer func() {
		_ = s.deps.JS.DeleteConsumer(context.WithoutCancel(ctx), bus.StreamEvents, cons.CachedInfo().Name)
	}()
	var text strings.Builder
	for left := cons.CachedInfo().NumPending; left > 0; {
		batch, err := cons.Fetch(int(min(left, 256)), jetstream.FetchContext(ctx))
		if err != nil {
			return "", fmt.Errorf("read back streamed text: %w", err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			collectDelta(&text, msg.Data(), requestID)
		}
		if err := batch.Error(); err != nil {
			return "", fmt.Errorf("read back streamed text: %w", err)
		}
		if n == 0 {
			return "", fmt.Errorf("read back streamed text: %d events did not arrive", left)
		}
		left -= uint64(n)
	}
	return text.String(), nil
}

// collectDelta adds one event to the text streamed for requestID.
func collectDelta(text *strings.Builder, data []byte, requestID string) {
	var ev proto.Event
	if json.Unmarshal(data, &ev) != nil || ev.RequestID != requestID {
		return
	}
	switch ev.Type {
	case proto.EventDelta:
		text.WriteString(ev.Delta)
	case proto.EventRetry, proto.EventFallback:
		text.Reset()
	}
}
