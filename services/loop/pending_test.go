package loop

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// pendingFixture is a loop service on a real bus with session s1 stored at
// step 1, and a commit of its own on its way that moves it to step 2 with
// two transcript messages the SESSIONS stream does not hold: a transition
// that read them from the stream instead of taking them from the commit
// could not decide.
type pendingFixture struct {
	s    *Service
	base uint64
	p    *pending
	data []byte
}

func newPendingFixture(t *testing.T) *pendingFixture {
	t.Helper()
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	s, err := New(ConfigFrom(config.Default()), service.Deps{NC: b.NC, JS: b.JS, Log: heraldtest.Logger(t)})
	require.NoError(t, err)
	kv, err := b.JS.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	s.store = sessionStore{kv: kv}
	base, err := json.Marshal(&State{SessionID: "s1", Step: 1})
	require.NoError(t, err)
	rec, err := s.store.commitRecord(ctx, "s1", base, 0)
	require.NoError(t, err)
	msgs := []*heraldpb.ChatMessage{{Role: "system", Content: "sys"}, {Role: "user", Content: "hello"}}
	next := &State{SessionID: "s1", Step: 2, TranscriptLen: 2, LogChain: chainNext(chainNext(0, msgs[0]), msgs[1])}
	data, err := json.Marshal(next)
	require.NoError(t, err)
	p := newPending(rec.rev, data, next, msgs)
	s.tr.begin("s1", p)
	return &pendingFixture{s: s, base: rec.rev, p: p, data: data}
}

// seen is what a transition decided on: the step, and how many transcript
// messages came with it.
type seen struct{ step, msgs int }

// advance runs a transition that moves the session one step on and
// publishes one event, in the background; it reports what it decided on.
func (f *pendingFixture) advance() (<-chan seen, <-chan error) {
	saw := make(chan seen, 4)
	done := make(chan error, 1)
	go func() {
		done <- f.s.advance(context.Background(), "s1", func(tx *txn) error {
			saw <- seen{tx.st.Step, len(tx.msgs)}
			tx.st.Step++
			tx.state(proto.StateThinking)
			return nil
		})
	}()
	return saw, done
}

// receive is the next value on ch, failing the test after 10 s.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came in 10 s")
		panic("unreachable")
	}
}

func (f *pendingFixture) stored(t *testing.T) *State {
	t.Helper()
	rec, err := f.s.store.get(context.Background(), "s1")
	require.NoError(t, err)
	st, err := rec.decode("s1")
	require.NoError(t, err)
	return st
}

// The commit on its way is already stored when the next transition reads
// the record (its answer is still travelling): the transition decides on
// that commit's state and transcript, commits on top of it, and publishes
// its events only after the commit it built on has done with its own.
func TestATransitionBuildsOnACommitStillOnItsWay(t *testing.T) {
	f := newPendingFixture(t)
	ctx := context.Background()
	events := make(chan *nats.Msg, 4)
	sub, err := f.s.deps.NC.ChanSubscribe(bus.SessionEvents("s1"), events)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	rec, err := f.s.store.commitRecord(ctx, "s1", f.data, f.base)
	require.NoError(t, err)
	f.p.settle(rec.rev)

	saw, done := f.advance()
	require.Equal(t, seen{step: 2, msgs: 2}, receive(t, saw), "decided on the commit on its way")
	require.Eventually(t, func() bool { return f.stored(t).Step == 3 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the transition finished (%v) before the commit it built on was done", err)
	default:
	}
	require.Empty(t, events, "no event before the commit it built on was done")

	close(f.p.done)
	require.NoError(t, receive(t, done))
	var ev proto.Event
	require.NoError(t, json.Unmarshal(receive(t, events).Data, &ev))
	require.Equal(t, proto.StateThinking, ev.State)
	cached, st, ok := f.s.tr.committed("s1")
	require.True(t, ok)
	require.Greater(t, cached.rev, rec.rev)
	require.Equal(t, 3, st.Step)
	require.Empty(t, saw, "decided once")
}

// The commit on its way is not stored yet when the next transition reads
// the record: the transition waits for that commit's answer and builds on
// it once it holds.
func TestATransitionWaitsForTheAnswerOfACommitOnItsWay(t *testing.T) {
	f := newPendingFixture(t)
	ctx := context.Background()
	at := make(chan uint64, 1)
	var holdErr error
	var held bool
	go func() {
		var rev uint64
		rev, held, holdErr = f.p.holdsFor(ctx, record{data: []byte("the record it replaces"), rev: f.base})
		at <- rev
	}()
	rec, err := f.s.store.commitRecord(ctx, "s1", f.data, f.base)
	require.NoError(t, err)
	f.p.settle(rec.rev)
	require.Equal(t, rec.rev, receive(t, at))
	require.NoError(t, holdErr)
	require.True(t, held)

	// through a whole transition: whichever the read finds, the pending
	// commit or the record it replaces, the decision is on the commit
	f = newPendingFixture(t)
	saw, done := f.advance()
	require.Equal(t, seen{step: 2, msgs: 2}, receive(t, saw))
	rec, err = f.s.store.commitRecord(ctx, "s1", f.data, f.base)
	require.NoError(t, err)
	f.p.settle(rec.rev)
	close(f.p.done)
	require.NoError(t, receive(t, done))
	require.Equal(t, 3, f.stored(t).Step)
}

// A commit on its way that loses (another process moved the session first)
// takes nothing with it: the transition that decided on it decides again on
// what is stored.
func TestATransitionOnACommitThatLostDecidesAgain(t *testing.T) {
	f := newPendingFixture(t)
	ctx := context.Background()
	held := make(chan error, 1)
	go func() {
		_, _, err := f.p.holdsFor(ctx, record{rev: f.base})
		held <- err
	}()
	f.p.settle(0)
	require.ErrorIs(t, receive(t, held), errConflict)

	// another process's commit is what the read finds
	f = newPendingFixture(t)
	other, err := json.Marshal(&State{SessionID: "s1", Step: 7})
	require.NoError(t, err)
	_, err = f.s.store.commitRecord(ctx, "s1", other, f.base)
	require.NoError(t, err)
	saw, done := f.advance()
	require.Equal(t, seen{step: 2, msgs: 2}, receive(t, saw), "first on the commit on its way")
	require.Equal(t, seen{step: 7, msgs: 0}, receive(t, saw), "then on what the read found")
	require.NoError(t, receive(t, done), "it did not wait for the commit that lost")
	require.Equal(t, 8, f.stored(t).Step)
}
