package gateway

import (
	"context"
	"fmt"
	"sync"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/transcript"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// A model request refers to the session's transcript instead of carrying
// it (heraldpb.TranscriptRef): it carries only the entries its session's
// previous request did not, and the gateway keeps the history it built for
// that request to put them after. A gateway that does not hold the start of
// a history (it restarted, another gateway served the previous step, the
// session was evicted) reads it from the SESSIONS stream once. Both parts
// are checked against the chain hashes before the model sees them.

// The histories kept, one per session log, are bounded in number and in
// the bytes of their messages (as protobuf) and of their kept encodings.
const (
	maxCachedHistories    = 1024
	maxCachedHistoryBytes = 256 << 20
)

// histories rebuilds the history a request refers to.
type histories struct {
	js jetstream.JetStream

	maxLogs, maxBytes int

	mu    sync.Mutex
	cache map[string]*logHistory
	bytes int // of every cached history
}

// logHistory is the start of a session log: its messages, the chain hash
// through each, the bytes up to each and each one's provider encodings
// (wirecache.go). No slice is changed once cached.
type logHistory struct {
	msgs   []*heraldpb.ChatMessage
	chains []uint64
	sizes  []int // sizes[i]: bytes of msgs[0..i]
	wire   []*wireSlot
	// charged is what it counts for in the cache's byte bound: its
	// messages and their kept encodings when it was kept.
	charged int
}

func (c *logHistory) size() int {
	if len(c.sizes) == 0 {
		return 0
	}
	return c.sizes[len(c.sizes)-1]
}

func newHistories(js jetstream.JetStream) *histories {
	return &histories{js: js, maxLogs: maxCachedHistories, maxBytes: maxCachedHistoryBytes, cache: map[string]*logHistory{}}
}

// resolve puts the history req refers to before its messages, so the rest
// of the gateway sees the whole conversation, and forgets the reference. It
// returns the wire slots of the history's messages (the first ones of
// req.Messages), nil when req carried its messages itself.
func (h *histories) resolve(ctx context.Context, req *heraldpb.LLMRequest) ([]*wireSlot, error) {
	ref := req.GetHistory()
	if ref == nil {
		return nil, nil
	}
	if !proto.IsToken(ref.GetLogId()) {
		return nil, bus.Permanent(fmt.Errorf("LLM request %s: history log %q is not a valid subject token", req.GetRequestId(), ref.GetLogId()))
	}
	from := int(ref.GetFrom())
	if from < 0 {
		return nil, bus.Permanent(fmt.Errorf("LLM request %s: history from %d", req.GetRequestId(), from))
	}
	start, err := h.start(ctx, ref.GetLogId(), from, ref.GetFromChain())
	if err != nil {
		return nil, fmt.Errorf("LLM request %s: %w", req.GetRequestId(), err)
	}
	n := from + len(ref.GetEntries())
	msgs := make([]*heraldpb.ChatMessage, n, n+len(req.GetMessages()))
	chains, sizes := make([]uint64, n), make([]int, n)
	copy(msgs, start.msgs[:from])
	copy(chains, start.chains[:from])
	copy(sizes, start.sizes[:from])
	wire := newWireSlots(n)
	copy(wire, start.wire[:min(from, len(start.wire))])
	chain, size := ref.GetFromChain(), 0
	if from > 0 {
		size = sizes[from-1]
	}
	for i, m := range ref.GetEntries() {
		chain = transcript.Chain(chain, m)
		size += gproto.Size(m)
		msgs[from+i], chains[from+i], sizes[from+i] = m, chain, size
	}
	if chain != ref.GetChain() {
		return nil, bus.Permanent(fmt.Errorf("LLM request %s: the history entries it carries do not match their chain (log %s, messages %d to %d)",
			req.GetRequestId(), ref.GetLogId(), from, n-1))
	}
	h.remember(ref.GetLogId(), &logHistory{msgs: msgs[:n:n], chains: chains, sizes: sizes, wire: wire})
	req.Messages = append(msgs, req.GetMessages()...)
	req.History = nil
	return wire, nil
}

// start returns a history holding at least the first n messages of log,
// whose chain through message n-1 is chain: the cached one when it agrees,
// else one read from the log and checked entry by entry.
func (h *histories) start(ctx context.Context, log string, n int, chain uint64) (*logHistory, error) {
	if n == 0 {
		return &logHistory{}, nil
	}
	h.mu.Lock()
	c := h.cache[log]
	h.mu.Unlock()
	if c != nil && len(c.msgs) >= n && c.chains[n-1] == chain {
		return c, nil
	}
	entries, err := transcript.ReadEntries(ctx, h.js, log, n, chain)
	if err != nil {
		return nil, err // not stored yet, or the server is away: redelivered later
	}
	out := &logHistory{msgs: make([]*heraldpb.ChatMessage, n), chains: make([]uint64, n), sizes: make([]int, n)}
	prev, size := uint64(0), 0
	for i, e := range entries {
		if e.GetMessage() == nil || transcript.Chain(prev, e.GetMessage()) != e.GetChain() {
			return nil, bus.Permanent(fmt.Errorf("transcript %s: entry %d does not match its chain", log, i))
		}
		size += gproto.Size(e.GetMessage())
		out.msgs[i], out.chains[i], out.sizes[i], prev = e.GetMessage(), e.GetChain(), size, e.GetChain()
	}
	if prev != chain {
		return nil, bus.Permanent(fmt.Errorf("transcript %s: its first %d messages are not the ones the request refers to", log, n))
	}
	return out, nil
}

// remember keeps c as log's history, evicting others (any) to stay within
// the bounds; a history larger than the byte bound is not kept. Its kept
// encodings count as they are now (those of the step about to be encoded
// count from the session's next step on).
func (h *histories) remember(log string, c *logHistory) {
	c.charged = c.size()
	for _, s := range c.wire {
		c.charged += s.bytes()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.cache[log]; ok {
		h.bytes -= old.charged
		delete(h.cache, log)
	}
	if c.charged > h.maxBytes {
		return
	}
	for k, old := range h.cache {
		if len(h.cache) < h.maxLogs && h.bytes+c.charged <= h.maxBytes {
			break
		}
		h.bytes -= old.charged
		delete(h.cache, k)
	}
	h.cache[log] = c
	h.bytes += c.charged
}
