package bus

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
)

// Fair share (issue 29): a worker takes a look-ahead window of pending
// messages, keeps one queue per tenant, and hands free handlers messages by
// weighted round robin over the tenants with work waiting, each tenant's in
// the order they came. A tenant's flood therefore waits behind its own
// messages, not another tenant's. Messages waiting in the window are kept
// alive with InProgress, so a process that dies holding them only delays
// them by AckWait: the server redelivers them as it would a crashed
// handler's. docs/ARCHITECTURE.md says why and shows the figures.

// HeaderTenant names the tenant a message's work is for. Herald's own
// publishers set it from their context (WithTenant); it is read only on
// internal subjects, which tenants cannot publish on. A task's tenant is
// read from its subject (or, on herald.tasks, its body), never the header.
const HeaderTenant = "Herald-Tenant"

type tenantKey struct{}

// WithTenant makes the messages published with ctx carry tenant in their
// HeaderTenant, so the work they start is scheduled as that tenant's.
func WithTenant(ctx context.Context, tenant string) context.Context {
	if tenant == "" || !proto.IsToken(tenant) {
		return ctx
	}
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantOf is the tenant WithTenant put in ctx ("" for none). A handler's
// context carries the tenant its message was scheduled as.
func TenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// MsgTenant is the tenant msg is scheduled as: a task's from its subject
// (herald.tasks.<tenant>) or its body (herald.tasks), other work's from the
// HeaderTenant its publisher set; "" for work of no tenant.
func MsgTenant(msg jetstream.Msg) string {
	o, err := TaskOriginOf(msg.Subject())
	switch {
	case err != nil:
		return headerTenant(msg)
	case o.Tenant != "":
		return o.Tenant
	case o.Subagent:
		// herald.subtasks: only the loop publishes there
		if t := headerTenant(msg); t != "" {
			return t
		}
	}
	var body struct {
		Tenant string `json:"tenant"`
	}
	if json.Unmarshal(msg.Data(), &body) != nil || !proto.IsToken(body.Tenant) {
		return ""
	}
	return body.Tenant
}

func headerTenant(msg jetstream.Msg) string {
	h := msg.Headers()
	if h == nil {
		return ""
	}
	if t := h.Get(HeaderTenant); proto.IsToken(t) {
		return t
	}
	return ""
}

// waitError is a handler's answer that its message must wait for room
// under a limit (Wait).
type waitError struct {
	scope    string
	position int
	err      error
}

func (e *waitError) Error() string { return e.err.Error() }
func (e *waitError) Unwrap() error { return e.err }

// Wait is what a handler returns when its message must wait for room under
// the limit named scope (a tenant's sessions, say): the worker neither acks
// nor naks it (it is not a failed delivery and never dead-letters), keeps it
// alive, and hands it to the handler again, oldest first, each time the
// scope may have room: at once when another message of the scope was let
// through, else every parkRetry.
func Wait(scope string, err error) error { return &waitError{scope: scope, err: err} }

// WaitAt is Wait for a message that knows its place among the scope's
// waiters (1: next): a worker that hands it back to the stream (it holds
// more waiting messages than its bounds) brings it back about when its
// turn may come, by how fast the scope's waiters have been going through.
func WaitAt(scope string, position int, err error) error {
	return &waitError{scope: scope, position: position, err: err}
}

// IsWait reports whether err is a Wait.
func IsWait(err error) bool {
	var w *waitError
	return errors.As(err, &w)
}

type throughKey struct{}

// throughFlag records that a handler said its message got through.
type throughFlag struct {
	mu   sync.Mutex
	done bool
}

func (f *throughFlag) passed() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// Through tells the worker that the message being handled in ctx, one that
// waited (Wait), got through its limit: the others waiting in its scope
// are tried again at once rather than when the handler returns, so they
// learn their new places (and take room that may remain) while it works.
// Outside a handler of a message that waited it does nothing.
func Through(ctx context.Context) {
	if f, ok := ctx.Value(throughKey{}).(func()); ok {
		f()
	}
}

// letThrough is Through for j, once.
func (w *Worker) letThrough(j job, f *throughFlag) {
	f.mu.Lock()
	first := !f.done
	f.done = true
	f.mu.Unlock()
	if !first {
		return
	}
	w.qmu.Lock()
	woke := w.window.done(j.scope)
	w.qmu.Unlock()
	if woke {
		w.wake()
	}
}

// parkRetry is how often a waiting scope's oldest message is tried again
// when nothing in this process freed room (room freed by another process);
// every message waiting is tried again every refreshAll, so that each
// renews its place under a limit (WaitLease) while an older one waits.
const (
	parkRetry  = 200 * time.Millisecond
	refreshAll = 5 * time.Second
)

// job is a message on its way to a handler: its tenant and, for a message
// that waited, the scope it waited in.
type job struct {
	msg    jetstream.Msg
	tenant string
	seq    uint64
	scope  string
	// position is its place among the scope's waiters when it last
	// waited (0: not known).
	position int
	// delivered is the server's delivery count when it came.
	delivered uint64
	// peeked: read past the window (peek.go), holding none of its room.
	peeked bool
}

// DefaultLookahead is how many pending messages a worker holds beyond its
// handlers, by its concurrency: enough to see past another tenant's backlog
// (docs/ARCHITECTURE.md), bounded so one process does not hoard a stream.
func DefaultLookahead(concurrency int) int { return min(max(16*concurrency, 64), 1024) }

// fairQueue is the worker's window: one FIFO per tenant, served by
// weighted round robin (each tenant in turn gets as many messages as its
// weight), plus messages that waited, served first.
type fairQueue struct {
	weight func(string) int
	queues map[string][]job
	ring   []string // tenants with messages queued, in turn order
	turn   int      // the tenant in ring whose turn it is
	credit int      // messages its turn has left
	n      int
	retry  []job
	// retried is set when the last message popped was a retry.
	retried bool
	// parked are messages waiting for room, by scope, oldest first;
	// trying counts those of a scope being tried again by a handler.
	parked map[string][]job
	trying map[string]int
	// maxParked and maxPerScope bound parked, in all and per scope (0:
	// no bound); park hands back the newest beyond them.
	maxParked, maxPerScope int
	// pace is, per scope, how fast its waiters went through here.
	pace map[string]*scopePace
}

// scopePace is how often a scope's waiters went through: the last time and
// a moving average of the time between two.
type scopePace struct {
	last  time.Time
	every time.Duration
}

func newFairQueue(weight func(string) int) *fairQueue {
	if weight == nil {
		weight = func(string) int { return 1 }
	}
	return &fairQueue{weight: weight, queues: map[string][]job{}, parked: map[string][]job{}, trying: map[string]int{},
		pace: map[string]*scopePace{}}
}

func (q *fairQueue) w(tenant string) int { return max(q.weight(tenant), 1) }

func (q *fairQueue) push(j job) {
	if len(q.queues[j.tenant]) == 0 {
		q.ring = append(q.ring, j.tenant)
		if len(q.ring) == 1 {
			q.turn, q.credit = 0, q.w(j.tenant)
		}
	}
	// in stream order: the pullers' fetches overlap, so a message may
	// arrive just after a later one of its tenant
	tq := append(q.queues[j.tenant], j)
	for i := len(tq) - 1; i > 0 && tq[i-1].seq > tq[i].seq; i-- {
		tq[i-1], tq[i] = tq[i], tq[i-1]
	}
	q.queues[j.tenant] = tq
	q.n++
}

// pop takes the next message: one that waited and is tried again, else the
// next of the tenant whose turn it is. fromWindow is false for a retry.
// With both waiting, they take turns: a scope's waiters, all tried again
// each time one goes through, would otherwise keep every handler busy
// while other tenants' messages wait in the window.
func (q *fairQueue) pop() (j job, fromWindow, ok bool) {
	if len(q.retry) > 0 && (q.n == 0 || !q.retried) {
		j, q.retry = q.retry[0], q.retry[1:]
		q.retried = true
		return j, false, true
	}
	q.retried = false
	if q.n == 0 {
		return job{}, false, false
	}
	if q.credit <= 0 {
		q.turn = (q.turn + 1) % len(q.ring)
		q.credit = q.w(q.ring[q.turn])
	}
	t := q.ring[q.turn]
	tq := q.queues[t]
	j, tq = tq[0], tq[1:]
	q.n--
	q.credit--
	if len(tq) > 0 {
		q.queues[t] = tq
		return j, true, true
	}
	delete(q.queues, t)
	q.ring = append(q.ring[:q.turn], q.ring[q.turn+1:]...)
	if len(q.ring) > 0 {
		q.turn %= len(q.ring)
		q.credit = q.w(q.ring[q.turn])
	}
	return j, true, true
}

// park keeps j until its scope may have room, in stream order. Beyond the
// bounds it returns the messages to hand back to the stream: the newest of
// j's scope beyond maxPerScope, then the newest of the scope holding most
// beyond maxParked. The oldest stay: they are the next to go.
func (q *fairQueue) park(j job, scope string, position int) (excess []job) {
	if j.scope != "" {
		q.trying[j.scope]-- // it was tried again and waits again
	}
	j.scope, j.position = scope, position
	q.keep(j)
	if q.maxPerScope > 0 && len(q.parked[scope]) > q.maxPerScope {
		excess = append(excess, q.dropNewest(scope))
	}
	for q.maxParked > 0 && q.parkedCount() > q.maxParked {
		excess = append(excess, q.dropNewest(q.fullest()))
	}
	return excess
}

// keep parks j (its scope set) whatever the bounds.
func (q *fairQueue) keep(j job) {
	p := q.parked[j.scope]
	i := sort.Search(len(p), func(i int) bool { return p[i].seq > j.seq })
	p = append(p, job{})
	copy(p[i+1:], p[i:])
	p[i] = j
	q.parked[j.scope] = p
}

func (q *fairQueue) dropNewest(scope string) job {
	p := q.parked[scope]
	j := p[len(p)-1]
	if len(p) == 1 {
		delete(q.parked, scope)
	} else {
		q.parked[scope] = p[:len(p)-1]
	}
	return j
}

// paced records that one of scope's waiters went through at now.
func (q *fairQueue) paced(scope string, now time.Time) {
	p := q.pace[scope]
	if p == nil {
		q.pace[scope] = &scopePace{last: now}
		return
	}
	gap := now.Sub(p.last)
	p.last = now
	if p.every == 0 {
		p.every = gap
	} else {
		p.every = (4*p.every + gap) / 5
	}
}

// returnDelay is how long j, handed back for the n-th time, stays away:
// about half the time the waiters ahead of it beyond those kept here take
// to go through at the scope's pace; with no pace known yet, longer the
// more often it came back and the further back it stands (so that a
// flood's hand-backs do not all come back at once: the server delivers
// them before any new message); between minReturn and maxReturn.
func (q *fairQueue) returnDelay(j job, n int) time.Duration {
	ahead := j.position - len(q.parked[j.scope])
	if p := q.pace[j.scope]; p != nil && p.every > 0 && j.position > 0 {
		return min(max(time.Duration(ahead)*p.every/2, minReturn), maxReturn)
	}
	spread := time.Duration(max(1, ahead/max(1, q.maxPerScope)))
	return min(minReturn<<min(max(n-1, 0), 6)*spread, maxReturn/4)
}

// minReturn and maxReturn bound how long a handed-back message stays away;
// maxReturn is well inside WaitLease, so it keeps its place among its
// scope's waiters.
const (
	minReturn = 250 * time.Millisecond
	maxReturn = 10 * time.Second
)

func (q *fairQueue) parkedCount() int {
	n := 0
	for _, p := range q.parked {
		n += len(p)
	}
	return n
}

// fullest is the scope with most messages parked (by name on a tie).
func (q *fairQueue) fullest() string {
	best, most := "", 0
	for scope, p := range q.parked {
		if len(p) > most || len(p) == most && scope < best {
			best, most = scope, len(p)
		}
	}
	return best
}

// retryHeads queues each waiting scope's oldest message (all of them,
// with all) to be tried again, unless one of the scope is with a handler
// already; it reports whether any was queued.
func (q *fairQueue) retryHeads(all bool) bool {
	queued := false
	for scope, p := range q.parked {
		if len(p) == 0 || q.trying[scope] > 0 {
			continue
		}
		n := 1
		if all {
			n = len(p)
		}
		q.trying[scope] += n
		q.retry = append(q.retry, p[:n]...)
		q.parked[scope] = p[n:]
		queued = true
	}
	return queued
}

// done is told that a message that waited in scope is done waiting (let
// through, or failed): the others waiting there are all tried again at
// once, oldest first (room may remain, and their positions moved); it
// reports whether any were.
func (q *fairQueue) done(scope string) bool {
	q.paced(scope, time.Now())
	q.trying[scope]--
	p := q.parked[scope]
	delete(q.parked, scope)
	if q.trying[scope] <= 0 {
		delete(q.trying, scope)
	}
	if len(p) == 0 {
		return false
	}
	q.trying[scope] += len(p)
	q.retry = append(q.retry, p...)
	return true
}

// held lists every message the queue holds (to keep them alive).
func (q *fairQueue) held() []jetstream.Msg {
	var out []jetstream.Msg
	for _, tq := range q.queues {
		for _, j := range tq {
			out = append(out, j.msg)
		}
	}
	for _, j := range q.retry {
		out = append(out, j.msg)
	}
	for _, p := range q.parked {
		for _, j := range p {
			out = append(out, j.msg)
		}
	}
	return out
}

// drain empties the queue, returning what it held.
func (q *fairQueue) drain() []jetstream.Msg {
	out := q.held()
	q.queues, q.ring, q.n, q.retry = map[string][]job{}, nil, 0, nil
	q.parked, q.trying, q.pace = map[string][]job{}, map[string]int{}, map[string]*scopePace{}
	return out
}

// enqueue puts a fetched message in the window, under its tenant.
func (w *Worker) enqueue(msg jetstream.Msg) {
	j := job{msg: msg, tenant: MsgTenant(msg)}
	if meta, err := msg.Metadata(); err == nil {
		j.seq, j.delivered = meta.Sequence.Stream, meta.NumDelivered
	}
	w.qmu.Lock()
	w.window.push(j)
	w.qmu.Unlock()
	w.wake()
}

func (w *Worker) wake() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// dispatchLoop hands each free handler the window's next message.
func (w *Worker) dispatchLoop() {
	defer w.pulling.Done()
	for {
		select {
		case <-w.idle:
		case <-w.stopping:
			return
		}
		j, ok := w.next()
		if !ok {
			w.idle <- struct{}{}
			return
		}
		w.dispatch(j)
	}
}

// next waits for the window's next message; false once the worker stops.
func (w *Worker) next() (job, bool) {
	for {
		w.qmu.Lock()
		j, fromWindow, ok := w.window.pop()
		w.qmu.Unlock()
		if ok {
			if fromWindow && !j.peeked {
				w.space <- struct{}{}
			}
			return j, true
		}
		select {
		case <-w.ready:
		case <-w.stopping:
			return job{}, false
		}
	}
}

// keep keeps the window's messages alive while they wait (a third of
// AckWait between InProgress, as keepAlive does for a handler's), and tries
// waiting scopes again every parkRetry.
func (w *Worker) keep() {
	defer w.pulling.Done()
	alive := time.NewTicker(w.spec.AckWait / 3)
	defer alive.Stop()
	retry := time.NewTicker(parkRetry)
	defer retry.Stop()
	refreshed := time.Now()
	for {
		select {
		case <-w.stopping:
			return
		case <-alive.C:
			w.qmu.Lock()
			held := w.window.held()
			w.qmu.Unlock()
			for _, m := range held {
				_ = m.InProgress()
			}
		case now := <-retry.C:
			all := now.Sub(refreshed) >= refreshAll
			if all {
				refreshed = now
			}
			w.qmu.Lock()
			queued := w.window.retryHeads(all)
			w.qmu.Unlock()
			if queued {
				w.wake()
			}
		}
	}
}

// settled handles a handler's Wait (the message waits in the window) and
// tells the window a message that waited is done waiting; true when the
// message is to be left as it is.
func (w *Worker) settled(j job, err error) bool {
	var we *waitError
	waits := errors.As(err, &we)
	if !waits && j.scope == "" {
		return false
	}
	select {
	case <-w.stopping:
		if waits {
			// handed back for another process (Stop handed back the rest)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			w.handBackStopping(ctx, j.msg)
			cancel()
			return true
		}
		return false
	default:
	}
	w.qmu.Lock()
	woke := false
	var excess []job
	if waits {
		excess = w.window.park(j, we.scope, we.position)
	} else {
		woke = w.window.done(j.scope)
	}
	w.qmu.Unlock()
	if woke {
		w.wake()
	}
	for _, x := range excess {
		if !w.handBackWaiting(x) {
			w.qmu.Lock()
			w.window.keep(x)
			w.qmu.Unlock()
		}
	}
	return waits
}

// handBack returns the messages still in the window to the stream, for
// another process (or this one's successor) to take at once.
//
// A worker whose messages may wait counts each as handed back (returns.go)
// first, within a few seconds in all: stopping never brings a message
// nearer dead-lettering.
func (w *Worker) handBack() {
	w.qmu.Lock()
	held := w.window.drain()
	w.qmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, m := range held {
		w.handBackStopping(ctx, m)
	}
}

// handBackStopping hands a message back as the worker stops, counted when
// it can be (else as a plain Nak, a delivery like any other).
func (w *Worker) handBackStopping(ctx context.Context, m jetstream.Msg) {
	// a message read past the window was never delivered: nothing to count
	if _, peeked := m.(*peekedMsg); w.returns != nil && !peeked && ctx.Err() == nil {
		if _, err := w.returns.add(ctx, m); err != nil {
			w.warnReturns(err)
		}
	}
	_ = m.Nak()
}
