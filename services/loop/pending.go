package loop

import (
	"bytes"
	"context"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// pending is a commit this process has sent and not yet heard back about. A
// transition of the same session that comes meanwhile (a tool result that
// beat the commit of the call it answers, a model reply that beat the commit
// of its request) decides on the state this commit writes instead of
// waiting for its answer, or deciding again on the record read back and
// reading the transcript from the stream (the read usually finds this
// commit already stored: its answer travels behind the read's).
type pending struct {
	base    uint64 // the revision it replaces (0: the session had none)
	data    []byte // the record it writes
	decoded *State // a copy of the state it writes, never decided on itself
	msgs    []*heraldpb.ChatMessage
	// settled is closed once the commit's outcome is known: rev is its
	// revision, 0 when it lost.
	settled chan struct{}
	rev     uint64
	// done is closed once the outcome is remembered and, for a commit that
	// held, its events are published and its after-commit work has run; a
	// transition that decided on it waits for done before its own.
	done chan struct{}
}

func newPending(base uint64, data []byte, st *State, msgs []*heraldpb.ChatMessage) *pending {
	return &pending{base: base, data: data, decoded: snapshot(st), msgs: msgs,
		settled: make(chan struct{}), done: make(chan struct{})}
}

// settle records the commit's outcome (0: it lost).
func (p *pending) settle(rev uint64) {
	p.rev = rev
	close(p.settled)
}

// holdsFor reports whether a decision on p stands for rec, the session's
// record as read, and at which revision p is stored. A read that shows p
// stored stands at once; one that shows the record p replaces (p was not
// stored yet when it was read) stands once p's answer says it held.
func (p *pending) holdsFor(ctx context.Context, rec record) (uint64, bool, error) {
	switch {
	case rec.rev > p.base && bytes.Equal(rec.data, p.data):
		return rec.rev, true, nil
	case rec.rev != p.base:
		return 0, false, nil
	}
	select {
	case <-p.settled:
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
	if p.rev == 0 {
		return 0, false, errConflict
	}
	return p.rev, true, nil
}

// begin marks p as the session's commit on its way.
func (t *transcripts) begin(sid string, p *pending) {
	t.mu.Lock()
	t.pending[sid] = p
	t.mu.Unlock()
}

// end clears p, if it is still the session's commit on its way.
func (t *transcripts) end(sid string, p *pending) {
	t.mu.Lock()
	if t.pending[sid] == p {
		delete(t.pending, sid)
	}
	t.mu.Unlock()
}

// pendingOf is the session's commit on its way here, if any, that a
// transition can decide on.
func (t *transcripts) pendingOf(sid string) *pending {
	t.mu.Lock()
	p := t.pending[sid]
	t.mu.Unlock()
	if p == nil || p.decoded == nil {
		return nil
	}
	return p
}
