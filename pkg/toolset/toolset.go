// Package toolset stores the tool definitions LLM requests refer to by
// digest. The loop offers the same definitions (about 10 KB for the
// built-in tools) on every step of a session; carried in every request they
// were most of the bytes the bus stored per step and a good part of what
// the gateway decoded and encoded again. Now the loop stores each distinct
// set once in the herald_toolsets bucket, keyed by the SHA-256 of its
// encoding, and a request names the digest (LLMRequest.tools_digest); the
// gateway reads a set once and keeps it.
package toolset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// ErrUnknown says no tool set is stored under a digest.
var ErrUnknown = errors.New("no tool set is stored under this digest")

// restoreAfter is how long a process trusts its own earlier store of a set:
// storing it again renews its time to live (bus.ToolSetTTL).
const restoreAfter = 24 * time.Hour

// maxKept bounds the sets a process keeps in memory.
const maxKept = 256

// Encode returns a set's deterministic encoding and its digest.
func Encode(tools []*heraldpb.ToolSpec) ([]byte, string, error) {
	data, err := gproto.MarshalOptions{Deterministic: true}.Marshal(&heraldpb.ToolSet{Tools: tools})
	if err != nil {
		return nil, "", fmt.Errorf("encode tool set: %w", err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:16]), nil
}

// Store reads and writes tool sets; it is safe for concurrent use.
type Store struct {
	bucket *bus.LazyBucket

	mu     sync.Mutex
	stored map[string]time.Time
	sets   map[string][]*heraldpb.ToolSpec
}

// NewStore returns a store on js's herald_toolsets bucket.
func NewStore(js jetstream.JetStream) *Store {
	return &Store{bucket: bus.NewLazyBucket(js, bus.BucketToolSets), stored: map[string]time.Time{},
		sets: map[string][]*heraldpb.ToolSpec{}}
}

func (s *Store) open(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := s.bucket.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open tool sets: %w", err)
	}
	return kv, nil
}

// Refer stores the set encoded as data under digest (from Encode) unless
// this process stored it within restoreAfter; once it returns, a request
// may name the digest.
func (s *Store) Refer(ctx context.Context, data []byte, digest string) error {
	s.mu.Lock()
	at, ok := s.stored[digest]
	s.mu.Unlock()
	if ok && time.Since(at) < restoreAfter {
		return nil
	}
	kv, err := s.open(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, digest, data); err != nil {
		return fmt.Errorf("store tool set %s: %w", digest, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stored) >= maxKept {
		clear(s.stored)
	}
	s.stored[digest] = time.Now()
	return nil
}

// Resolve returns the set stored under digest, checked against it.
func (s *Store) Resolve(ctx context.Context, digest string) ([]*heraldpb.ToolSpec, error) {
	s.mu.Lock()
	tools, ok := s.sets[digest]
	s.mu.Unlock()
	if ok {
		return tools, nil
	}
	kv, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, digest)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("tool set %s: %w", digest, ErrUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("read tool set %s: %w", digest, err)
	}
	set := &heraldpb.ToolSet{}
	if err := gproto.Unmarshal(e.Value(), set); err != nil {
		return nil, fmt.Errorf("tool set %s: %w", digest, err)
	}
	if _, got, err := Encode(set.GetTools()); err != nil || got != digest {
		return nil, fmt.Errorf("tool set %s: stored definitions do not match their digest", digest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) >= maxKept {
		clear(s.sets)
	}
	s.sets[digest] = set.GetTools()
	return set.GetTools(), nil
}
