package bus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Looking past the window (issue 29). A worker's window shares what it
// holds; a tenant's message published behind more than a window of
// another's waits until the window reaches it (3,000 tasks: 1.5–1.9 s). A
// worker whose stream's subjects name the tenant (ConsumerSpec.PeekSubjects:
// herald.tasks.<tenant>) therefore looks past a window crowded by others:
// it asks the stream which of those subjects hold messages, and for a
// tenant with none in its window reads that tenant's oldest messages the
// consumer has not delivered to anyone yet straight from the stream, puts
// them in its window under their tenant, and deletes each from the stream
// once it is handled (the ack a work queue would do). Nothing else
// changes: a message handled this way is handled as a delivered one; one
// whose handler fails is left in the stream, for the consumer to deliver
// in its turn; a process that dies holding one leaves it there too. The
// only new case is a message the consumer delivers to another process in
// the moment between the look and the delete, which both then handle: a
// handler must already tolerate a redelivery (a task's start does).
//
// A message read this way spends none of its deliveries, so one whose
// handler fails is never read past the window again: it waits for the
// consumer, whose retry delays and MaxDeliver then apply. It runs at most
// once more than MaxDeliver allows. (Read again at each look, a task that
// always failed ran every 100 ms while the window stayed crowded, never
// nearer dead-lettering.) A message handed back while it waits for a limit
// has not failed and is read again in its turn.

const (
	// peekEvery is how often a crowded window looks past itself.
	peekEvery = 100 * time.Millisecond
	// peekPerTenant bounds the messages of one tenant a worker holds read
	// past its window.
	peekPerTenant = 16
)

// crowded says whether the window holds so many messages that one
// published now would wait behind them: three quarters of its room.
func (w *Worker) crowded() bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return w.window.n >= w.spec.Lookahead*3/4
}

// peekLoop looks past a crowded window every peekEvery until the worker stops.
func (w *Worker) peekLoop(cons jetstream.Consumer) {
	defer w.pulling.Done()
	t := time.NewTicker(peekEvery)
	defer t.Stop()
	var warned time.Time
	for {
		select {
		case <-w.stopping:
			return
		case <-t.C:
		}
		if !w.crowded() {
			continue
		}
		if err := w.peek(cons); err != nil && time.Since(warned) > time.Minute {
			warned = time.Now()
			w.log.Warn().Err(err).Msg("could not look past a crowded window; other tenants' messages wait for it to reach them")
		}
	}
}

// peek reads, for each tenant with messages in the stream and none in the
// window, its oldest messages not yet delivered, into the window.
func (w *Worker) peek(cons jetstream.Consumer) error {
	ctx, cancel := context.WithTimeout(w.handling, 5*time.Second)
	defer cancel()
	stream, err := w.js.Stream(ctx, w.spec.Stream)
	if err != nil {
		return err
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	// the consumer delivers in stream order: past this, nobody has them
	floor := ci.Delivered.Stream
	w.qmu.Lock()
	for seq := range w.failedPeeks {
		if seq <= floor { // delivered by the consumer since: its own now
			delete(w.failedPeeks, seq)
		}
	}
	w.qmu.Unlock()
	added := false
	for _, filter := range w.spec.PeekSubjects {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return err
		}
		for subject, count := range info.State.Subjects {
			if count == 0 {
				continue
			}
			o, err := TaskOriginOf(subject)
			if err != nil || o.Tenant == "" {
				continue
			}
			n, err := w.peekTenant(ctx, stream, subject, o.Tenant, floor)
			if err != nil {
				return err
			}
			added = added || n > 0
		}
	}
	if added {
		w.wake()
	}
	return nil
}

// peekTenant reads up to peekPerTenant of subject's messages past floor
// into the window, unless the window holds messages of tenant already; it
// returns how many it added.
func (w *Worker) peekTenant(ctx context.Context, stream jetstream.Stream, subject, tenant string, floor uint64) (int, error) {
	w.qmu.Lock()
	room := peekPerTenant - w.peeking[tenant]
	if len(w.window.queues[tenant]) > 0 {
		room = 0
	}
	w.qmu.Unlock()
	added := 0
	for seq := floor + 1; room > 0; room-- {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return added, nil
		}
		if err != nil {
			return added, err
		}
		seq = raw.Sequence + 1
		w.qmu.Lock()
		if w.peeked[raw.Sequence] || w.failedPeeks[raw.Sequence] {
			w.qmu.Unlock()
			continue
		}
		w.peeked[raw.Sequence] = true
		w.peeking[tenant]++
		m := &peekedMsg{raw: raw, stream: stream, name: w.spec.Stream, durable: w.spec.Durable,
			done: func(failed bool) { w.peekDone(raw.Sequence, tenant, failed) }}
		w.window.push(job{msg: m, tenant: tenant, seq: raw.Sequence, delivered: 1, peeked: true})
		w.qmu.Unlock()
		added++
	}
	return added, nil
}

// peekDone forgets a message read past the window once it is handled or
// left to the consumer; one whose handler failed is never read past the
// window again.
func (w *Worker) peekDone(seq uint64, tenant string, failed bool) {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	delete(w.peeked, seq)
	if failed {
		w.failedPeeks[seq] = true
	}
	if w.peeking[tenant]--; w.peeking[tenant] <= 0 {
		delete(w.peeking, tenant)
	}
}

// peekedMsg is a message read from its stream rather than delivered by the
// consumer: acknowledging it deletes it from the stream, as a work queue's
// ack does; a nak leaves it there, for the consumer to deliver in its turn.
// A nak with a delay is a failed handler's (consume.go), a plain one a
// hand-back's (a message waiting for a limit, or a worker stopping).
type peekedMsg struct {
	raw     *jetstream.RawStreamMsg
	stream  jetstream.Stream
	name    string // the stream's
	durable string
	once    sync.Once
	done    func(failed bool)
}

func (m *peekedMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Stream: m.raw.Sequence},
		NumDelivered: 1,
		Stream:       m.name,
		Consumer:     m.durable,
		Timestamp:    m.raw.Time,
	}, nil
}

func (m *peekedMsg) Data() []byte                { return m.raw.Data }
func (m *peekedMsg) Headers() nats.Header        { return m.raw.Header }
func (m *peekedMsg) Subject() string             { return m.raw.Subject }
func (m *peekedMsg) Reply() string               { return "" }
func (m *peekedMsg) Ack() error                  { return m.remove(context.Background()) }
func (m *peekedMsg) Term() error                 { return m.remove(context.Background()) }
func (m *peekedMsg) TermWithReason(string) error { return m.remove(context.Background()) }
func (m *peekedMsg) InProgress() error           { return nil }
func (m *peekedMsg) Nak() error                  { m.finish(false); return nil }

func (m *peekedMsg) DoubleAck(ctx context.Context) error { return m.remove(ctx) }

func (m *peekedMsg) NakWithDelay(time.Duration) error { m.finish(true); return nil }

// finish tells the worker, once, that the message is done with here.
func (m *peekedMsg) finish(failed bool) { m.once.Do(func() { m.done(failed) }) }

// remove deletes the message from its stream; one already gone (the
// consumer delivered it elsewhere and it was acknowledged) is fine.
func (m *peekedMsg) remove(ctx context.Context) error {
	defer m.finish(false)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := m.stream.DeleteMsg(ctx, m.raw.Sequence)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return err
	}
	return nil
}
