package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastBySubscription returns the last message stored on subject in stream,
// read through an ephemeral consumer filtered to subject rather than a
// STREAM.MSG.GET. The consumer's filter is part of its create subject, so a
// NATS user may be allowed to read one kind of subject only (a client its
// sessions' results, a tenant its own copies), which a message get, whose
// subject travels in the payload, cannot be narrowed to. The payload of a
// claim is resolved. jetstream.ErrMsgNotFound says there is none.
// replayIdle is how long the server keeps a replay consumer its reader
// could not delete.
const replayIdle = 10 * time.Second

func LastBySubscription(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	// A plain ephemeral consumer, not an ordered one: an ordered consumer
	// recreates itself when it sees its consumer deleted, which could leave
	// one behind the read.
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		FilterSubject: subject, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: replayIdle})
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", subject, err)
	}
	info := cons.CachedInfo()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = js.DeleteConsumer(dctx, stream, info.Name)
	}()
	if info.NumPending == 0 {
		return nil, jetstream.ErrMsgNotFound
	}
	wait := time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), time.Millisecond)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(wait))
	if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
		return nil, jetstream.ErrMsgNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", subject, err)
	}
	data, err := Resolve(ctx, js, msg.Subject(), msg.Headers(), msg.Data())
	if err != nil {
		return nil, err
	}
	return &jetstream.RawStreamMsg{Subject: msg.Subject(), Header: msg.Headers(), Data: data}, nil
}
