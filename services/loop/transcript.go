package loop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// transcripts appends to and rebuilds session transcripts from the SESSIONS
// stream. Entries carry their index, so an append repeated after a crash can
// never duplicate a message.
type transcripts struct {
	js jetstream.JetStream

	mu    sync.Mutex
	cache map[string]*cachedTranscript
}

// cachedTranscript is a transcript known to be committed at a state
// revision, with the state record this process committed there.
type cachedTranscript struct {
	rev   uint64
	msgs  []*heraldpb.ChatMessage
	state []byte
}

const maxCachedSessions = 4096

func newTranscripts(js jetstream.JetStream) *transcripts {
	return &transcripts{js: js, cache: map[string]*cachedTranscript{}}
}

func entryID(sid string, index int) string { return "log:" + sid + ":" + strconv.Itoa(index) }

// append adds msgs to b at indexes from, from+1, ...
func (t *transcripts) append(ctx context.Context, b *bus.Batch, sid string, turn, from int, msgs ...*heraldpb.ChatMessage) {
	now := time.Now().UnixMilli()
	for i, m := range msgs {
		e := &heraldpb.TranscriptEntry{SessionId: sid, Index: int32(from + i), Message: m, TsUnixMs: now, Turn: int32(turn)}
		b.Proto(ctx, bus.SessionLog(sid), entryID(sid, from+i), e)
	}
}

// load returns the first n messages of the session's transcript (kept in
// log), from the cache when it is current for rev, else from the stream.
func (t *transcripts) load(ctx context.Context, sid, log string, rev uint64, n int) ([]*heraldpb.ChatMessage, error) {
	t.mu.Lock()
	c := t.cache[sid]
	t.mu.Unlock()
	if c != nil && c.rev == rev && len(c.msgs) >= n {
		return c.msgs[:n:n], nil
	}
	msgs, err := ReadTranscript(ctx, t.js, log, n)
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// committed returns the state record this process last committed for the
// session, if it is still cached.
func (t *transcripts) committed(sid string) (record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cache[sid]
	if c == nil || c.state == nil {
		return record{}, false
	}
	return record{data: c.state, rev: c.rev}, true
}

// remember records the transcript and state committed at rec's revision.
func (t *transcripts) remember(sid string, rec record, msgs []*heraldpb.ChatMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.cache) >= maxCachedSessions {
		for k := range t.cache {
			delete(t.cache, k)
			break
		}
	}
	t.cache[sid] = &cachedTranscript{rev: rec.rev, msgs: msgs, state: rec.data}
}

func (t *transcripts) forget(sid string) {
	t.mu.Lock()
	delete(t.cache, sid)
	t.mu.Unlock()
}

// ReadTranscript reads the first n messages (n < 0: all) of a session's
// transcript from the SESSIONS stream, ignoring repeated indexes.
func ReadTranscript(ctx context.Context, js jetstream.JetStream, sid string, n int) ([]*heraldpb.ChatMessage, error) {
	entries, err := ReadEntries(ctx, js, sid, n)
	if err != nil {
		return nil, err
	}
	msgs := make([]*heraldpb.ChatMessage, len(entries))
	for i, e := range entries {
		msgs[i] = e.Message
	}
	return msgs, nil
}

// ReadEntries reads transcript entries in index order. When an index was
// written more than once (an append orphaned by a crash or a lost race, then
// the committed one), the latest write wins: a committed transition always
// writes after any orphan it supersedes.
func ReadEntries(ctx context.Context, js jetstream.JetStream, sid string, n int) ([]*heraldpb.TranscriptEntry, error) {
	if n == 0 {
		return nil, nil
	}
	stream, err := js.Stream(ctx, bus.StreamSessions)
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	subject := bus.SessionLog(sid)
	byIndex := map[int32]*heraldpb.TranscriptEntry{}
	for seq := uint64(1); ; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read transcript %s: %w", sid, err)
		}
		seq = raw.Sequence + 1
		data, err := bus.Resolve(ctx, js, raw.Subject, raw.Header, raw.Data)
		if err != nil {
			return nil, fmt.Errorf("transcript %s entry %d: %w", sid, raw.Sequence, err)
		}
		e := &heraldpb.TranscriptEntry{}
		if err := gproto.Unmarshal(data, e); err != nil {
			return nil, fmt.Errorf("transcript %s entry %d: %w", sid, raw.Sequence, err)
		}
		byIndex[e.Index] = e
	}
	var out []*heraldpb.TranscriptEntry
	for i := int32(0); n < 0 || int(i) < n; i++ {
		e, ok := byIndex[i]
		if !ok {
			break
		}
		out = append(out, e)
	}
	if n > 0 && len(out) < n {
		return nil, fmt.Errorf("transcript %s has %d of %d messages", sid, len(out), n)
	}
	return out, nil
}
