package bus

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// LazyBucket opens a KV bucket on first use: a service that only sometimes
// needs a bucket starts without it, and a failed open is tried again at the
// next use. Safe for concurrent use.
type LazyBucket struct {
	js   jetstream.JetStream
	name string
	mu   sync.Mutex
	kv   jetstream.KeyValue
}

// NewLazyBucket returns a LazyBucket for the bucket name.
func NewLazyBucket(js jetstream.JetStream, name string) *LazyBucket {
	return &LazyBucket{js: js, name: name}
}

// Open returns the bucket, opening it if it is not open yet.
func (b *LazyBucket) Open(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	kv, err := b.js.KeyValue(ctx, b.name)
	if err != nil {
		return nil, err
	}
	b.kv = kv
	return kv, nil
}
