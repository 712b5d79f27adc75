package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Claim-check: a payload larger than the server accepts in one message (a
// long session's history, say) is stored in its stream's claim store (object
// store herald_claims_<stream>) and the message carries only its name in
// header Herald-Claim and the store in Herald-Claim-Store. Publish does this
// on the way out; the worker and LastOnSubject resolve it on the way in, so
// handlers always see the whole payload. One store per stream means whoever
// may read (or write) a stream's claims is whoever may read (or write) the
// stream: a tool runner cannot read a claimed model request.
const (
	HeaderClaim      = "Herald-Claim"
	HeaderClaimStore = "Herald-Claim-Store"
	claimTTL         = 30 * 24 * time.Hour
	// claimHeadroom leaves room under the server's max payload for headers.
	claimHeadroom = 64 << 10
)

// ClaimStreams are the streams whose payloads may outgrow the max payload:
// every stream published to through Publish but CONTROL (interrupts and
// answers typed by people). EVENTS are core publishes, best effort, and the
// DLQ keeps a dead letter's claim where it was.
var ClaimStreams = []string{StreamTasks, StreamSessions, StreamLLMRequests, StreamLLMResponses,
	StreamToolCalls, StreamToolResults, StreamCompress, StreamCompressResults, StreamUsage, StreamToolEvents}

// ClaimStore is the object store holding the claims of stream.
func ClaimStore(stream string) string { return "herald_claims_" + strings.ToLower(stream) }

// claimStoreFor is the claim store of the stream that stores subject.
func claimStoreFor(subject string) (string, error) {
	for _, cfg := range Streams(1) {
		for _, filter := range cfg.Subjects {
			if subjectMatches(filter, subject) {
				if !slices.Contains(ClaimStreams, cfg.Name) {
					return "", fmt.Errorf("stream %s keeps no claims", cfg.Name)
				}
				return ClaimStore(cfg.Name), nil
			}
		}
	}
	return "", fmt.Errorf("no stream stores %s", subject)
}

// subjectMatches reports whether subject falls under filter (* one token,
// > the rest).
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// claimLimit is the largest payload sent inline: under the server's max
// payload and the streams' largest message.
func claimLimit(js jetstream.JetStream) int {
	limit := int64(1 << 20)
	if nc := js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		limit = nc.MaxPayload()
	}
	return int(min(limit, defaultMaxMsgSize)) - claimHeadroom
}

// publishClaim stores data in the object store and publishes a reference.
func publishClaim(ctx context.Context, js jetstream.JetStream, subject, id string, data []byte) error {
	store, err := claimStoreFor(subject)
	if err != nil {
		return fmt.Errorf("%d-byte payload for %s is over the server's max payload and %w", len(data), subject, err)
	}
	obj, err := js.ObjectStore(ctx, store)
	if err != nil {
		return fmt.Errorf("claim store %s: %w", store, err)
	}
	name := id
	if name == "" {
		name = nuid.Next()
	}
	name = "c-" + Token(name)
	if _, err := obj.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("store %d-byte payload for %s: %w", len(data), subject, err)
	}
	m := NewTracedMsg(ctx, subject, nil)
	m.Header.Set(HeaderClaim, name)
	m.Header.Set(HeaderClaimStore, store)
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	if _, err := js.PublishMsg(ctx, m, opts...); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

// Resolve returns the whole payload of a message stored on subject, fetching
// it from the claim store when the message only refers to it. The store is
// the subject's stream's (a dead letter's: its original stream's), never
// one a header names, so a publisher cannot point a reader at claims of a
// stream it may not write.
func Resolve(ctx context.Context, js jetstream.JetStream, subject string, h nats.Header, data []byte) ([]byte, error) {
	name := h.Get(HeaderClaim)
	if name == "" {
		return data, nil
	}
	var store string
	var err error
	if strings.HasPrefix(subject, dlqPrefix) {
		store = ClaimStore(h.Get(HeaderStream))
	} else if store, err = claimStoreFor(subject); err != nil {
		return nil, Permanent(fmt.Errorf("claim %s on %s: %w", name, subject, err))
	}
	if named := h.Get(HeaderClaimStore); named != "" && named != store {
		return nil, Permanent(fmt.Errorf("claim %s on %s names store %s, not its stream's %s", name, subject, named, store))
	}
	obj, err := js.ObjectStore(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("claim store %s: %w", store, err)
	}
	full, err := obj.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("claimed payload %s: %w", name, err)
	}
	return full, nil
}

// DropClaim deletes the claimed payload of a message stored on subject, if
// it has one: the worker does so once a work queue's message is
// acknowledged, since nothing reads it again. (A dead letter keeps its claim.)
func DropClaim(ctx context.Context, js jetstream.JetStream, subject string, h nats.Header) error {
	name := h.Get(HeaderClaim)
	if name == "" {
		return nil
	}
	store, err := claimStoreFor(subject)
	if err != nil {
		return err
	}
	obj, err := js.ObjectStore(ctx, store)
	if err != nil {
		return fmt.Errorf("claim store %s: %w", store, err)
	}
	if err := obj.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete claim %s: %w", name, err)
	}
	return nil
}

// isWorkQueue says whether stream is one Herald declares as a work queue.
func isWorkQueue(stream string) bool {
	for _, cfg := range Streams(1) {
		if cfg.Name == stream {
			return cfg.Retention == jetstream.WorkQueuePolicy
		}
	}
	return false
}

// Payload is a delivered message's whole payload (see Resolve).
func Payload(ctx context.Context, js jetstream.JetStream, msg jetstream.Msg) ([]byte, error) {
	return Resolve(ctx, js, msg.Subject(), msg.Headers(), msg.Data())
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
	data, err := Resolve(ctx, js, msg.Subject(), msg.Headers(), msg.Data())
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
