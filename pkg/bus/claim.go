package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Claim-check: a payload larger than the server accepts in one message (a
// long session's history, say) is stored in the herald_claims object store
// and the message carries only its name in header Herald-Claim. Publish does
// this on the way out; the worker and LastOnSubject resolve it on the way in,
// so handlers always see the whole payload.
const (
	HeaderClaim  = "Herald-Claim"
	BucketClaims = "herald_claims"
	claimTTL     = 30 * 24 * time.Hour
	// claimHeadroom leaves room under the server's max payload for headers.
	claimHeadroom = 64 << 10
)

// claimLimit is the largest payload sent inline.
func claimLimit(js jetstream.JetStream) int {
	limit := int64(1 << 20)
	if nc := js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		limit = nc.MaxPayload()
	}
	return int(limit) - claimHeadroom
}

// publishClaim stores data in the object store and publishes a reference.
func publishClaim(ctx context.Context, js jetstream.JetStream, subject, id string, data []byte) error {
	obj, err := js.ObjectStore(ctx, BucketClaims)
	if err != nil {
		return fmt.Errorf("claim store: %w", err)
	}
	name := id
	if name == "" {
		name = nuid.Next()
	}
	name = "c-" + Token(name)
	if _, err := obj.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("store %d-byte payload for %s: %w", len(data), subject, err)
	}
	m := nats.NewMsg(subject)
	m.Header.Set(HeaderClaim, name)
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	if _, err := js.PublishMsg(ctx, m, opts...); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

// Resolve returns a message's whole payload, fetching it from the claim
// store when the message only refers to it.
func Resolve(ctx context.Context, js jetstream.JetStream, h nats.Header, data []byte) ([]byte, error) {
	name := h.Get(HeaderClaim)
	if name == "" {
		return data, nil
	}
	obj, err := js.ObjectStore(ctx, BucketClaims)
	if err != nil {
		return nil, fmt.Errorf("claim store: %w", err)
	}
	full, err := obj.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("claimed payload %s: %w", name, err)
	}
	return full, nil
}

// claimedMsg is a delivered message whose payload was resolved from a claim.
type claimedMsg struct {
	jetstream.Msg
	data []byte
}

func (m claimedMsg) Data() []byte { return m.data }

// resolveMsg swaps a claim reference for its payload; a claim that cannot be
// read is permanent (the payload is gone), other failures are retried.
func resolveMsg(ctx context.Context, js jetstream.JetStream, msg jetstream.Msg) (jetstream.Msg, error) {
	if msg.Headers().Get(HeaderClaim) == "" {
		return msg, nil
	}
	data, err := Resolve(ctx, js, msg.Headers(), msg.Data())
	if err != nil {
		if isNotFound(err) {
			return nil, Permanent(err)
		}
		return nil, err
	}
	return claimedMsg{Msg: msg, data: data}, nil
}

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, jetstream.ErrBucketNotFound)
}
