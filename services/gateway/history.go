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
)

// A model request refers to the session's transcript instead of carrying
// it (heraldpb.TranscriptRef): it carries only the entries its session's
// previous request did not, and the gateway keeps the history it built for
// that request to put them after. A gateway that does not hold the start of
// a history (it restarted, another gateway served the previous step, the
// session was evicted) reads it from the SESSIONS stream once. Both parts
// are checked against the chain hashes before the model sees them.

// maxCachedHistories bounds the histories kept, one per session log.
const maxCachedHistories = 1024

// histories rebuilds the history a request refers to.
type histories struct {
	js jetstream.JetStream

	mu    sync.Mutex
	cache map[string]*logHistory
}

// logHistory is the start of a session log: its messages and the chain hash
// through each. Neither slice is ever changed once cached.
type logHistory struct {
	msgs   []*heraldpb.ChatMessage
	chains []uint64
}

func newHistories(js jetstream.JetStream) *histories {
	return &histories{js: js, cache: map[string]*logHistory{}}
}

// resolve puts the history req refers to before its messages, so the rest
// of the gateway sees the whole conversation, and forgets the reference.
func (h *histories) resolve(ctx context.Context, req *heraldpb.LLMRequest) error {
	ref := req.GetHistory()
	if ref == nil {
		return nil
	}
	if !proto.IsToken(ref.GetLogId()) {
		return bus.Permanent(fmt.Errorf("LLM request %s: history log %q is not a valid subject token", req.GetRequestId(), ref.GetLogId()))
	}
	from := int(ref.GetFrom())
	if from < 0 {
		return bus.Permanent(fmt.Errorf("LLM request %s: history from %d", req.GetRequestId(), from))
	}
	start, err := h.start(ctx, ref.GetLogId(), from, ref.GetFromChain())
	if err != nil {
		return fmt.Errorf("LLM request %s: %w", req.GetRequestId(), err)
	}
	n := from + len(ref.GetEntries())
	msgs := make([]*heraldpb.ChatMessage, n, n+len(req.GetMessages()))
	chains := make([]uint64, n)
	copy(msgs, start.msgs[:from])
	copy(chains, start.chains[:from])
	chain := ref.GetFromChain()
	for i, m := range ref.GetEntries() {
		chain = transcript.Chain(chain, m)
		msgs[from+i], chains[from+i] = m, chain
	}
	if chain != ref.GetChain() {
		return bus.Permanent(fmt.Errorf("LLM request %s: the history entries it carries do not match their chain (log %s, messages %d to %d)",
			req.GetRequestId(), ref.GetLogId(), from, n-1))
	}
	h.remember(ref.GetLogId(), &logHistory{msgs: msgs[:n:n], chains: chains})
	req.Messages = append(msgs, req.GetMessages()...)
	req.History = nil
	return nil
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
	out := &logHistory{msgs: make([]*heraldpb.ChatMessage, n), chains: make([]uint64, n)}
	prev := uint64(0)
	for i, e := range entries {
		if e.GetMessage() == nil || transcript.Chain(prev, e.GetMessage()) != e.GetChain() {
			return nil, bus.Permanent(fmt.Errorf("transcript %s: entry %d does not match its chain", log, i))
		}
		out.msgs[i], out.chains[i], prev = e.GetMessage(), e.GetChain(), e.GetChain()
	}
	if prev != chain {
		return nil, bus.Permanent(fmt.Errorf("transcript %s: its first %d messages are not the ones the request refers to", log, n))
	}
	return out, nil
}

func (h *histories) remember(log string, c *logHistory) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.cache[log]; !ok && len(h.cache) >= maxCachedHistories {
		for k := range h.cache {
			delete(h.cache, k)
			break
		}
	}
	h.cache[log] = c
}
