package bus

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// streams keeps the stream handles reads go through. Getting a handle asks
// the server for the stream's info, a round trip as long as the read
// itself, and a handle stays good as long as the stream does: it is
// forgotten after any failed read and fetched again.
var streams streamHandles

// maxStreamHandles bounds the handles kept (a few streams per connection;
// tests open many connections): past it, all are dropped.
const maxStreamHandles = 256

type streamHandles struct {
	m sync.Map
	n atomic.Int64
}

type streamKey struct {
	js   jetstream.JetStream
	name string
}

func (h *streamHandles) get(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	key := streamKey{js: js, name: name}
	if s, ok := h.m.Load(key); ok {
		return s.(jetstream.Stream), nil
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	if h.n.Add(1) > maxStreamHandles {
		h.m.Clear()
		h.n.Store(1)
	}
	h.m.Store(key, s)
	return s, nil
}

func (h *streamHandles) forget(js jetstream.JetStream, name string) {
	h.m.Delete(streamKey{js: js, name: name})
}
