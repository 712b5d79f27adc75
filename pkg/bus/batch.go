package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// batchTimeout bounds Wait when ctx has no deadline, as a single Publish
// is bounded by the client's default timeout.
const batchTimeout = 5 * time.Second

// Batch stores several messages with one wait instead of one round trip
// each: every message is sent at once, in order, and Wait returns when all
// are stored. Messages on one stream are stored in the order they were
// added. After an error some may be stored and others not, as after a
// crash between sequential publishes, so each must carry its id.
type Batch struct {
	js      jetstream.JetStream
	pending []batchAck
	err     error
}

type batchAck struct {
	subject string
	ack     jetstream.PubAckFuture
}

// NewBatch returns an empty batch publishing through js.
func NewBatch(js jetstream.JetStream) *Batch { return &Batch{js: js} }

// Proto adds m on subject, stored once per id.
func (b *Batch) Proto(ctx context.Context, subject, id string, m proto.Message) {
	data, err := proto.Marshal(m)
	if err != nil {
		b.fail(fmt.Errorf("encode %T: %w", m, err))
		return
	}
	b.Add(ctx, subject, id, data)
}

// JSON adds v as JSON on subject, stored once per id when id is set.
func (b *Batch) JSON(ctx context.Context, subject, id string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		b.fail(fmt.Errorf("encode %T: %w", v, err))
		return
	}
	b.Add(ctx, subject, id, data)
}

// Add sends data on subject without waiting for it to be stored. A payload
// too large for one message is claim-checked at once (see claim.go). After
// an error nothing more is sent.
func (b *Batch) Add(ctx context.Context, subject, id string, data []byte) {
	if b.err != nil {
		return
	}
	if len(data) > claimLimit(b.js) {
		b.fail(publishClaim(ctx, b.js, subject, id, data))
		return
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := b.js.PublishMsgAsync(NewTracedMsg(ctx, subject, data), opts...)
	if err != nil {
		b.fail(fmt.Errorf("publish %s: %w", subject, err))
		return
	}
	b.pending = append(b.pending, batchAck{subject: subject, ack: ack})
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Wait returns once every message added is stored, or the first error.
func (b *Batch) Wait(ctx context.Context) error {
	if len(b.pending) > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, batchTimeout)
			defer cancel()
		}
	}
	for _, p := range b.pending {
		if err := awaitAck(ctx, p.ack); err != nil {
			b.fail(fmt.Errorf("publish %s: %w", p.subject, err))
			break
		}
	}
	b.pending = nil
	return b.err
}

func awaitAck(ctx context.Context, ack jetstream.PubAckFuture) error {
	select {
	case <-ack.Ok():
		return nil
	case err := <-ack.Err():
		return err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nats.ErrTimeout
		}
		return ctx.Err()
	}
}
