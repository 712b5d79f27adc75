package bus

import (
	"context"
	"fmt"
	"strconv"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of a dead letter.
const (
	HeaderError      = "Herald-Error"
	HeaderSubject    = "Herald-Subject"
	HeaderStream     = "Herald-Stream"
	HeaderConsumer   = "Herald-Consumer"
	HeaderDeliveries = "Herald-Deliveries"
)

// maxReason keeps a reason header well inside NATS header limits.
const maxReason = 2000

// DeadLetter stores msg's payload on herald.dlq.<stream> with the reason and
// the original subject in headers, then terminates msg so it is not redelivered.
// The message is acknowledged only after the dead letter is stored.
func DeadLetter(ctx context.Context, js jetstream.JetStream, msg jetstream.Msg, reason string) error {
	meta, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("dead-letter: metadata: %w", err)
	}
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "…"
	}
	dl := nats.NewMsg(DeadLetterSubject(meta.Stream))
	dl.Data = msg.Data()
	dl.Header.Set(HeaderError, reason)
	dl.Header.Set(HeaderSubject, msg.Subject())
	dl.Header.Set(HeaderStream, meta.Stream)
	dl.Header.Set(HeaderConsumer, meta.Consumer)
	dl.Header.Set(HeaderDeliveries, strconv.FormatUint(meta.NumDelivered, 10))
	if claim := msg.Headers().Get(HeaderClaim); claim != "" {
		// the payload stays in the claim store
		dl.Header.Set(HeaderClaim, claim)
		dl.Header.Set(HeaderClaimStore, msg.Headers().Get(HeaderClaimStore))
	}
	id := fmt.Sprintf("dlq:%s:%d", meta.Stream, meta.Sequence.Stream)
	if _, err := js.PublishMsg(ctx, dl, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("dead-letter %s: %w", msg.Subject(), err)
	}
	telemetry.DeadLettered(meta.Stream)
	return msg.Term()
}

// DeadLetterRaw stores a payload that arrived outside a stream (a core
// request) in the dead-letter stream named after the place it arrived at.
func DeadLetterRaw(ctx context.Context, js jetstream.JetStream, stream, subject string, data []byte, reason string) error {
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "…"
	}
	dl := nats.NewMsg(DeadLetterSubject(stream))
	dl.Data = data
	dl.Header.Set(HeaderError, reason)
	dl.Header.Set(HeaderSubject, subject)
	dl.Header.Set(HeaderStream, stream)
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		return err
	}
	telemetry.DeadLettered(stream)
	return nil
}
