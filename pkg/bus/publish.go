package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// PublishProto stores m on subject, stored once per id (Nats-Msg-Id).
func PublishProto(ctx context.Context, js jetstream.JetStream, subject, id string, m proto.Message) error {
	data, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %T: %w", m, err)
	}
	return Publish(ctx, js, subject, id, data)
}

// PublishJSON stores v as JSON on subject, stored once per id when id is set.
func PublishJSON(ctx context.Context, js jetstream.JetStream, subject, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	return Publish(ctx, js, subject, id, data)
}

// Publish stores data on subject; id, when set, makes retries store it once.
// A payload too large for one message is claim-checked (see claim.go).
func Publish(ctx context.Context, js jetstream.JetStream, subject, id string, data []byte) error {
	if len(data) > claimLimit(js) {
		return publishClaim(ctx, js, subject, id, data)
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	if _, err := js.PublishMsg(ctx, NewTracedMsg(ctx, subject, data), opts...); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

var errReconnected = errors.New("reconnected before the reply came")

// againOnReconnect runs op, and runs it again at once if the connection
// reconnects while op waits: a request that a restarting server took with it
// is never answered and would wait out its whole timeout, holding up the
// session for that long. op must be safe to repeat: a read. (Publish does
// not use it, even with an id: that a stream leader elected moments earlier
// always recognises the id, and stores the message once, is unverified.)
func againOnReconnect(ctx context.Context, nc *nats.Conn, op func(context.Context) error) error {
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	for {
		err := untilReconnect(ctx, reconnected, op)
		if !errors.Is(err, errReconnected) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// untilReconnect runs op, cancelling it with errReconnected if the
// connection reconnects first.
func untilReconnect(ctx context.Context, reconnected <-chan nats.Status, op func(context.Context) error) error {
	attempt, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	result := make(chan error, 1)
	go func() { result <- op(attempt) }()
	select {
	case err := <-result:
		return err
	case <-reconnected:
		cancel(errReconnected)
		<-result
		return errReconnected
	}
}

// Decode parses a protobuf payload; a failure is Permanent since no retry can
// make a malformed message well-formed.
func Decode(data []byte, m proto.Message) error {
	if err := proto.Unmarshal(data, m); err != nil {
		return Permanent(fmt.Errorf("malformed %T: %w", m, err))
	}
	return nil
}

// LastOnSubject returns the last message stored on subject in stream, or
// jetstream.ErrMsgNotFound.
func LastOnSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	var raw *jetstream.RawStreamMsg
	err := againOnReconnect(ctx, js.Conn(), func(ctx context.Context) (err error) {
		raw, err = lastOnSubject(ctx, js, stream, subject)
		return err
	})
	return raw, err
}

func lastOnSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	s, err := streams.get(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			streams.forget(js, stream)
		}
		return nil, err
	}
	if raw.Data, err = Resolve(ctx, js, raw.Subject, raw.Header, raw.Data); err != nil {
		return nil, err
	}
	return raw, nil
}

// NextOnSubject returns the first message stored on subject in stream at or
// after sequence seq, or jetstream.ErrMsgNotFound.
func NextOnSubject(ctx context.Context, js jetstream.JetStream, stream, subject string, seq uint64) (*jetstream.RawStreamMsg, error) {
	var raw *jetstream.RawStreamMsg
	err := againOnReconnect(ctx, js.Conn(), func(ctx context.Context) error {
		s, err := streams.get(ctx, js, stream)
		if err != nil {
			return err
		}
		if raw, err = s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject)); err != nil {
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				streams.forget(js, stream)
			}
			return err
		}
		raw.Data, err = Resolve(ctx, js, raw.Subject, raw.Header, raw.Data)
		return err
	})
	return raw, err
}

// FirstOnSubjectSince returns the first message stored on subject in stream
// at or after time since, looking no further than sequence last (the last
// message on subject), or jetstream.ErrMsgNotFound: a binary search over
// the stream's sequences, one lookup per step.
func FirstOnSubjectSince(ctx context.Context, js jetstream.JetStream, stream, subject string, since time.Time, last uint64) (*jetstream.RawStreamMsg, error) {
	var found *jetstream.RawStreamMsg
	lo, hi := uint64(1), last
	for lo <= hi {
		mid := lo + (hi-lo)/2
		m, err := NextOnSubject(ctx, js, stream, subject, mid)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break // nothing on subject from mid on, nor from any later sequence
		}
		if err != nil {
			return nil, err
		}
		if m.Time.Before(since) {
			lo = m.Sequence + 1
			continue
		}
		found, hi = m, mid-1
	}
	if found == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return found, nil
}

// NewMsg returns a fresh message for subject with data.
func NewMsg(subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	return m
}

// NewTracedMsg is NewMsg carrying ctx's trace context (W3C traceparent) in
// its headers, so the consumer's work joins the publisher's trace, and the
// tenant ctx's work is for (WithTenant), so it is scheduled fairly.
func NewTracedMsg(ctx context.Context, subject string, data []byte) *nats.Msg {
	m := NewMsg(subject, data)
	telemetry.Inject(ctx, m.Header)
	if t := TenantOf(ctx); t != "" {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(HeaderTenant, t)
	}
	return m
}
