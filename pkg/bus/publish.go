package bus

import (
	"context"
	"encoding/json"
	"fmt"

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
	if _, err := js.Publish(ctx, subject, data, opts...); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
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
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return nil, err
	}
	if raw.Data, err = Resolve(ctx, js, raw.Subject, raw.Header, raw.Data); err != nil {
		return nil, err
	}
	return raw, nil
}

// NewMsg returns a fresh message for subject with data.
func NewMsg(subject string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	return m
}
