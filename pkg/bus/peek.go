package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	// scanPerLook bounds the messages of a shared subject read per look to
	// learn their tenants; scanMax the messages indexed at once.
	scanPerLook = 512
	scanMax     = 1 << 16
)

// On a shared subject (ConsumerSpec.PeekShared: herald.tasks, whose tasks
// name their tenant inside) the stream cannot say which tenants have
// messages waiting. So a crowded window reads on past the consumer's
// floor, up to scanPerLook messages a look, and indexes each message's
// sequence under its tenant (each message read once, at most scanMax
// held); tenants with none in the window then have their oldest indexed
// messages read past the window as on a tenant's own subject. A backlog
// of one tenant costs one extra read a message, only while the window is
// crowded.
type sharedScan struct {
	next uint64              // the next sequence to read
	seqs map[string][]uint64 // by tenant, oldest first, past the floor
	n    int
}

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
	for _, subject := range w.spec.PeekShared {
		n, err := w.peekShared(ctx, stream, subject, floor)
		if err != nil {
			return err
		}
		added = added || n > 0
	}
	if added {
		w.wake()
	}
	return nil
}

// peekShared indexes subject's messages past floor by tenant, up to
// scanPerLook more, and reads each tenant's oldest into the window as
// peekTenant does; it returns how many it added.
func (w *Worker) peekShared(ctx context.Context, stream jetstream.Stream, subject string, floor uint64) (int, error) {
	sc := w.shared[subject]
	if sc == nil {
		sc = &sharedScan{seqs: map[string][]uint64{}}
		w.shared[subject] = sc
	}
	// what the consumer delivered since is its own
	sc.next = max(sc.next, floor+1)
	for tenant, seqs := range sc.seqs {
		i := 0
		for i < len(seqs) && seqs[i] <= floor {
			i++
		}
		sc.n -= i
		if i == len(seqs) {
			delete(sc.seqs, tenant)
		} else {
			sc.seqs[tenant] = seqs[i:]
		}
	}
	if n := min(scanPerLook, scanMax-sc.n); n > 0 {
		msgs, err := directBatch(ctx, w.js.Conn(), w.spec.Stream, subject, sc.next, n)
		if err != nil {
			return 0, err
		}
		for _, raw := range msgs {
			sc.next = raw.Sequence + 1
			tenant := MsgTenant(&peekedMsg{raw: raw})
			sc.seqs[tenant] = append(sc.seqs[tenant], raw.Sequence)
			sc.n++
		}
	}
	added := 0
	for tenant, seqs := range sc.seqs {
		room := w.peekRoom(tenant)
		for i := 0; i < len(seqs) && room > 0; i++ {
			if w.readPast(seqs[i]) {
				continue
			}
			raw, err := stream.GetMsg(ctx, seqs[i])
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				// handled past the window and deleted: forget it
				seqs = append(seqs[:i], seqs[i+1:]...)
				sc.n--
				i--
				continue
			}
			if err != nil {
				return added, err
			}
			if w.pushPeeked(stream, raw, tenant) {
				added++
				room--
			}
		}
		if len(seqs) == 0 {
			delete(sc.seqs, tenant)
		} else {
			sc.seqs[tenant] = seqs
		}
	}
	return added, nil
}

// peekRoom is how many more of tenant's messages may be read past the
// window: none while the window holds one of tenant's.
func (w *Worker) peekRoom(tenant string) int {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if len(w.window.queues[tenant]) > 0 {
		return 0
	}
	return peekPerTenant - w.peeking[tenant]
}

// readPast says whether the message at seq is in the window read past
// it, or was and failed.
func (w *Worker) readPast(seq uint64) bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return w.peeked[seq] || w.failedPeeks[seq]
}

// pushPeeked puts raw in the window under tenant, read past it, unless it
// is there already or its handler failed once read so (failedPeeks).
func (w *Worker) pushPeeked(stream jetstream.Stream, raw *jetstream.RawStreamMsg, tenant string) bool {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if w.peeked[raw.Sequence] || w.failedPeeks[raw.Sequence] {
		return false
	}
	w.peeked[raw.Sequence] = true
	w.peeking[tenant]++
	m := &peekedMsg{raw: raw, stream: stream, name: w.spec.Stream, durable: w.spec.Durable,
		done: func(failed bool) { w.peekDone(raw.Sequence, tenant, failed) }}
	w.window.push(job{msg: m, tenant: tenant, seq: raw.Sequence, delivered: 1, peeked: true})
	return true
}

// peekTenant reads up to peekPerTenant of subject's messages past floor
// into the window, unless the window holds messages of tenant already; it
// returns how many it added.
func (w *Worker) peekTenant(ctx context.Context, stream jetstream.Stream, subject, tenant string, floor uint64) (int, error) {
	added := 0
	for seq, room := floor+1, w.peekRoom(tenant); room > 0; room-- {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return added, nil
		}
		if err != nil {
			return added, err
		}
		seq = raw.Sequence + 1
		if w.pushPeeked(stream, raw, tenant) {
			added++
		}
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

// directBatch reads up to n messages of subject from seq on in one direct
// get (nats-server 2.11+: a batch answered message after message, then an
// end-of-batch status): read one by one, a scan of a crowded stream fell
// behind the consumer it was to look ahead of.
func directBatch(ctx context.Context, nc *nats.Conn, stream, subject string, seq uint64, n int) ([]*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(map[string]any{"seq": seq, "next_by_subj": subject, "batch": n})
	if err != nil {
		return nil, err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return nil, err
	}
	var out []*jetstream.RawStreamMsg
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return out, fmt.Errorf("direct get of %s: %w", stream, err)
		}
		switch m.Header.Get("Status") {
		case "204", "404": // the end of the batch; no message at all
			return out, nil
		case "":
		default:
			return out, fmt.Errorf("direct get of %s: %s %s", stream, m.Header.Get("Status"), m.Header.Get("Description"))
		}
		got, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return out, fmt.Errorf("direct get of %s: no sequence", stream)
		}
		ts, _ := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
		out = append(out, &jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: got,
			Header: m.Header, Data: m.Data, Time: ts})
	}
}
