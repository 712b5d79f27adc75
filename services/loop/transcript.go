package loop

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/transcript"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// transcripts appends to and rebuilds session transcripts from the SESSIONS
// stream. Entries carry their index, so an append repeated after a crash can
// never duplicate a message.
type transcripts struct {
	js jetstream.JetStream

	mu    sync.Mutex
	cache map[string]*cachedTranscript
	// pending holds each session's commit on its way (pending.go).
	pending map[string]*pending
}

// cachedTranscript is a transcript known to be committed at a state
// revision, with the state record this process committed there.
type cachedTranscript struct {
	rev   uint64
	msgs  []*heraldpb.ChatMessage
	state []byte
	// decoded is state as decoded (snapshot), nil when it must be decoded.
	decoded *State
}

const maxCachedSessions = 4096

func newTranscripts(js jetstream.JetStream) *transcripts {
	return &transcripts{js: js, cache: map[string]*cachedTranscript{}, pending: map[string]*pending{}}
}

// entryID names an entry by its index and chain: a repeat of the same
// append (a retry, a redelivery) is stored once, while a different message
// at the same index (written by a transition that then lost its commit, and
// the committed one) is stored too, for the chain to choose between.
func entryID(sid string, index int, chain uint64) string {
	return "log:" + sid + ":" + strconv.Itoa(index) + ":" + strconv.FormatUint(chain, 16)
}

// chainNext extends a log's chain hash prev with m.
func chainNext(prev uint64, m *heraldpb.ChatMessage) uint64 { return transcript.Chain(prev, m) }

// append adds msgs to b at indexes from, from+1, ..., extending the chain
// prev of the messages before them (each link computed by next); it returns
// the chain through the last.
func (t *transcripts) append(ctx context.Context, b *bus.Batch, next func(uint64, *heraldpb.ChatMessage) uint64,
	sid, tenant string, turn, from int, prev uint64, msgs ...*heraldpb.ChatMessage) uint64 {
	now := time.Now().UnixMilli()
	chain := prev
	for i, m := range msgs {
		link := next(chain, m)
		e := &heraldpb.TranscriptEntry{SessionId: sid, Index: int32(from + i), Message: m, TsUnixMs: now, Turn: int32(turn),
			Chain: link, PrevChain: chain, Tenant: tenant}
		b.Proto(ctx, bus.SessionLog(sid), entryID(sid, from+i, link), e)
		chain = link
	}
	return chain
}

// load returns the first n messages of the session's transcript (kept in
// log), from the cache when it is current for rev, else from the stream.
func (t *transcripts) load(ctx context.Context, sid, log string, rev uint64, n int, chain uint64) ([]*heraldpb.ChatMessage, error) {
	t.mu.Lock()
	c := t.cache[sid]
	t.mu.Unlock()
	if c != nil && c.rev == rev && len(c.msgs) >= n {
		return c.msgs[:n:n], nil
	}
	msgs, err := ReadTranscript(ctx, t.js, log, n, chain)
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// committed returns the state record this process last committed for the
// session, if it is still cached, with a copy of its state to decide on
// (nil: decode the record).
func (t *transcripts) committed(sid string) (record, *State, bool) {
	t.mu.Lock()
	c := t.cache[sid]
	t.mu.Unlock()
	if c == nil || c.state == nil {
		return record{}, nil, false
	}
	return record{data: c.state, rev: c.rev}, snapshot(c.decoded), true
}

// remember records the transcript and the state committed at rec's
// revision (decoded: a copy of it, made by snapshot).
func (t *transcripts) remember(sid string, rec record, decoded *State, msgs []*heraldpb.ChatMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.cache) >= maxCachedSessions {
		for k := range t.cache {
			delete(t.cache, k)
			break
		}
	}
	t.cache[sid] = &cachedTranscript{rev: rec.rev, msgs: msgs, state: rec.data, decoded: decoded}
}

func (t *transcripts) forget(sid string) {
	t.mu.Lock()
	delete(t.cache, sid)
	t.mu.Unlock()
}

// ReadTranscript reads the first n messages (n < 0: all) of a session's
// transcript from the SESSIONS stream (see ReadEntries).
func ReadTranscript(ctx context.Context, js jetstream.JetStream, sid string, n int, chain uint64) ([]*heraldpb.ChatMessage, error) {
	entries, err := ReadEntries(ctx, js, sid, n, chain)
	if err != nil {
		return nil, err
	}
	msgs := make([]*heraldpb.ChatMessage, len(entries))
	for i, e := range entries {
		msgs[i] = e.Message
	}
	return msgs, nil
}

// ReadEntries reads the first n transcript entries (n < 0: all) in index
// order, choosing among an index's writes by the chain (see
// transcript.ReadEntries).
func ReadEntries(ctx context.Context, js jetstream.JetStream, sid string, n int, chain uint64) ([]*heraldpb.TranscriptEntry, error) {
	return transcript.ReadEntries(ctx, js, sid, n, chain)
}
