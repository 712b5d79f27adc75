package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// txn is one transition of a session: read state and transcript, decide,
// then publish appended messages and effects and commit the state.
type txn struct {
	s    *Service
	st   *State
	rev  uint64
	msgs []*heraldpb.ChatMessage // committed transcript
	// baseChain is the chain hash of msgs, which appended messages extend.
	baseChain uint64

	appended []*heraldpb.ChatMessage
	effects  []func(context.Context, *bus.Batch)
	events   []proto.Event
	// committed run once the transition's state is committed.
	committed []func()
	noop      bool
	// inHand is the tool result this transition was handed; completing a
	// step reads it from here instead of from the stream.
	inHand *heraldpb.ToolResult
	// chains holds the chain hashes this transition computed: referring to
	// the transcript, checking the previous reference and appending each
	// hash the same new messages, and a message can be large.
	chains map[chainLink]uint64
}

// chainLink is one step of a log's chain: the hash before m, and m.
type chainLink struct {
	prev uint64
	m    *heraldpb.ChatMessage
}

// chainNext is chainNext(prev, m), computed once per transition.
func (t *txn) chainNext(prev uint64, m *heraldpb.ChatMessage) uint64 {
	k := chainLink{prev, m}
	if c, ok := t.chains[k]; ok {
		return c
	}
	if t.chains == nil {
		t.chains = map[chainLink]uint64{}
	}
	c := chainNext(prev, m)
	t.chains[k] = c
	return c
}

// history is the transcript as it will be after this transition.
func (t *txn) history() []*heraldpb.ChatMessage {
	out := make([]*heraldpb.ChatMessage, 0, len(t.msgs)+len(t.appended))
	return append(append(out, t.msgs...), t.appended...)
}

func (t *txn) appendMsg(m *heraldpb.ChatMessage) { t.appended = append(t.appended, m) }

// dropUnanswered takes the prompts of turns that ended without an answer
// (failed, interrupted before the model replied) off the end of the
// transcript, so the next prompt starts clean instead of being merged into
// them. The next message is written at their index; the chain tells the
// readers which write of an index counts.
func (t *txn) dropUnanswered() {
	n := len(t.msgs)
	for n > 0 && t.msgs[n-1] != nil && t.msgs[n-1].Role == "user" {
		n--
	}
	if n == len(t.msgs) || n == 0 {
		return
	}
	t.msgs = t.msgs[:n:n]
	t.baseChain = 0
	for _, m := range t.msgs {
		t.baseChain = t.chainNext(t.baseChain, m)
	}
}

// effect adds a publish that must be stored before the state commits.
func (t *txn) effect(f func(context.Context, *bus.Batch)) { t.effects = append(t.effects, f) }

func (t *txn) event(ev proto.Event) {
	t.st.EventSeq++
	ev.SessionID, ev.TaskID, ev.Seq = t.st.SessionID, t.st.TaskID, t.st.EventSeq
	t.events = append(t.events, ev)
}

// afterCommit runs f once this transition is committed (never for a
// speculative or losing decision).
func (t *txn) afterCommit(f func()) { t.committed = append(t.committed, f) }

func (t *txn) state(name string) {
	t.event(proto.Event{Type: proto.EventState, State: name, Step: t.st.Step})
	t.s.log.Debug().Str("session_id", t.st.SessionID).Int("turn", t.st.Turn).Int("step", t.st.Step).
		Str("state", name).Int64("tokens", t.st.Usage.InputTokens+t.st.Usage.OutputTokens+t.st.Usage.CacheReadTokens).
		Str("fingerprint", t.st.LastFingerprint).Msg("state transition")
}

const (
	maxConflictRetries = 8
	// earlyPatience is how long an early input waits in-process for the
	// transition that expects it before it is redelivered later instead.
	earlyPatience = 2 * time.Second
)

// advance runs decide against the session's current state and commits its
// outcome; on a concurrent update it re-reads and decides again, and an
// early input waits briefly for the state that expects it.
func (s *Service) advance(ctx context.Context, sid string, decide func(t *txn) error) error {
	conflicts := 0
	wait := 500 * time.Microsecond
	deadline := time.Now().Add(earlyPatience)
	for {
		// taken before the read: a commit that lands while it is on its
		// way wakes the wait below at once
		committed := s.commits.next(sid)
		err := s.advanceOnce(ctx, sid, decide)
		switch {
		case errors.Is(err, errConflict) && conflicts < maxConflictRetries:
			conflicts++
		case errors.Is(err, errEarly) && time.Now().Before(deadline):
			// The transition this input answers is usually this process's
			// own, still committing: wake at its commit (the signal was
			// taken before the read, so one landing since is not missed);
			// one committed elsewhere is seen by the next read.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-committed:
			case <-time.After(wait):
			}
			wait = min(2*wait, 20*time.Millisecond)
		default:
			return err
		}
	}
}

// advanceOnce reads the session's state and, while the read is on its way,
// decides against the state this process last committed (or is committing:
// pending.go), which is usually still current; that decision stands only if
// the read finds that very record, and nothing is published before the read
// confirms it.
func (s *Service) advanceOnce(ctx context.Context, sid string, decide func(t *txn) error) error {
	current := s.store.fetch(ctx, sid)
	g := s.speculate(ctx, sid, decide)
	got := <-current
	if got.err != nil {
		return got.err
	}
	stands, err := s.stands(ctx, &g, got.rec)
	if err != nil {
		return err
	}
	if !stands {
		g = s.decideOnRead(ctx, sid, got.rec, decide)
	}
	t, err := g.t, g.err
	if err != nil || t.noop {
		return err
	}
	if t.st == nil {
		return fmt.Errorf("session %s: transition produced no state", sid)
	}
	ctx = bus.WithTenant(telemetry.WithTraceparent(ctx, t.st.Trace), t.st.Tenant)
	if err := s.publish(ctx, t); err != nil {
		return err
	}
	t.st.TranscriptLen = len(t.msgs) + len(t.appended)
	data, err := json.Marshal(t.st)
	if err != nil {
		return fmt.Errorf("encode session %s: %w", sid, err)
	}
	p := newPending(t.rev, data, t.st, t.history())
	defer close(p.done) // also on a panic: a transition waiting for p goes on
	s.tr.begin(sid, p)
	defer s.tr.end(sid, p)
	rec, err := s.store.commitRecord(ctx, sid, data, t.rev)
	p.settle(rec.rev)
	if g.on != nil {
		// what the commit decided on does once it holds comes first: its
		// state in the cache, its events before this one's
		<-g.on.done
	}
	if err != nil {
		s.tr.forget(sid)
		return err
	}
	s.tr.remember(sid, rec, p.decoded, p.msgs)
	s.tr.end(sid, p)
	s.commits.done(sid)
	s.observe(t)
	for _, ev := range t.events {
		ev.BoundTenant = t.st.BoundTenant
		if err := bus.PublishEvent(s.deps.NC, ev); err != nil {
			s.log.Warn().Err(err).Str("session_id", sid).Msg("publishing event failed")
		}
	}
	for _, f := range t.committed {
		f()
	}
	return nil
}

// guess is a decision made before the read of the session's record came
// back: on the record this process last committed (rec), or on a commit of
// its own still on its way (on).
type guess struct {
	rec record
	on  *pending
	t   *txn
	err error
}

// speculate decides against the state this process is committing or last
// committed, or returns no transition when it knows neither.
func (s *Service) speculate(ctx context.Context, sid string, decide func(t *txn) error) guess {
	if p := s.tr.pendingOf(sid); p != nil {
		return s.decideOnPending(p, 0, decide)
	}
	rec, st, ok := s.tr.committed(sid)
	if !ok {
		return guess{}
	}
	var t *txn
	var err error
	if st == nil {
		t, err = s.decideOn(ctx, sid, rec, decide)
	} else {
		t, err = s.decideOnState(ctx, sid, rec.rev, st, decide)
	}
	return guess{rec: rec, t: t, err: err}
}

// decideOnRead decides on rec, the record as read: when it is the one a
// commit of this process on its way writes, on that commit's state, without
// decoding the record or reading the transcript from the stream.
func (s *Service) decideOnRead(ctx context.Context, sid string, rec record, decide func(t *txn) error) guess {
	if p := s.tr.pendingOf(sid); p != nil && rec.rev > p.base && bytes.Equal(rec.data, p.data) {
		return s.decideOnPending(p, rec.rev, decide)
	}
	t, err := s.decideOn(ctx, sid, rec, decide)
	return guess{rec: rec, t: t, err: err}
}

// decideOnPending decides on the state p writes, stored at rev (0: not
// known yet).
func (s *Service) decideOnPending(p *pending, rev uint64, decide func(t *txn) error) guess {
	st := snapshot(p.decoded) // a copy of a copy: never nil
	t := &txn{s: s, st: st, rev: rev, msgs: p.msgs[:len(p.msgs):len(p.msgs)], baseChain: st.LogChain}
	return guess{on: p, t: t, err: decide(t)}
}

// stands reports whether g's decision holds for rec, the record as read; a
// decision on a pending commit takes the revision that commit is stored at.
func (s *Service) stands(ctx context.Context, g *guess, rec record) (bool, error) {
	switch {
	case g.t == nil:
		return false, nil
	case g.on == nil:
		return g.rec.same(rec), nil
	}
	rev, ok, err := g.on.holdsFor(ctx, rec)
	if ok {
		g.t.rev = rev
	}
	return ok, err
}

// decideOn runs decide against the state in rec and its transcript.
func (s *Service) decideOn(ctx context.Context, sid string, rec record, decide func(t *txn) error) (*txn, error) {
	st, err := rec.decode(sid)
	if err != nil {
		return nil, err
	}
	return s.decideOnState(ctx, sid, rec.rev, st, decide)
}

// decideOnState runs decide against st, the state at revision rev (nil:
// none), and its transcript.
func (s *Service) decideOnState(ctx context.Context, sid string, rev uint64, st *State, decide func(t *txn) error) (*txn, error) {
	var err error
	t := &txn{s: s, st: st, rev: rev}
	if st != nil {
		t.baseChain = st.LogChain
		if t.msgs, err = s.tr.load(ctx, sid, st.logID(), rev, st.TranscriptLen, st.LogChain); err != nil {
			return nil, err
		}
	}
	return t, decide(t)
}

// publish stores the transition's appended messages, then its effects, all
// sent at once and awaited together: every one is stored before the state
// that expects them is committed.
func (s *Service) publish(ctx context.Context, t *txn) error {
	b := bus.NewBatch(s.deps.JS)
	t.st.LogChain = s.tr.append(ctx, b, t.chainNext, t.st.logID(), t.st.Tenant, t.st.Turn, len(t.msgs), t.baseChain, t.appended...)
	for _, eff := range t.effects {
		eff(ctx, b)
	}
	return b.Wait(ctx)
}
