package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = 2 * time.Second
	// pullRetryDelay spaces pulls the server refuses (a deleted consumer).
	pullRetryDelay = 250 * time.Millisecond
	// pullers is the pull requests a worker keeps open at once: one, so
	// that a tenant's messages join the window in their order (fair.go).
	pullers = 1
	// maxPullBatch caps the messages one pull request asks for.
	maxPullBatch = 256
)

// DefaultAckWait is how long a message a process took may go unanswered
// before another process gets it.
const DefaultAckWait = 5 * time.Second

// Handler processes one message. Returning nil acks it; an error marked
// Permanent dead-letters it; any other error redelivers it after a delay,
// until MaxDeliver is reached, when it is dead-lettered with that error.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// ConsumerSpec describes a shared durable pull consumer and how to run it.
type ConsumerSpec struct {
	Stream         string
	Durable        string
	FilterSubjects []string
	// Concurrency caps how many messages this process handles at once.
	Concurrency int
	MaxDeliver  int
	AckWait     time.Duration
	// RetryDelays are the nak delays by delivery count (the last repeats).
	RetryDelays []time.Duration
	// DeliverNew starts a new consumer at the end of the stream.
	DeliverNew bool
	// Weight is a tenant's share of the handlers when several tenants have
	// work waiting (fair.go); nil or below 1 is 1.
	Weight func(tenant string) int
	// Lookahead is how many pending messages the worker holds beyond its
	// handlers to share them fairly (0: DefaultLookahead).
	Lookahead int
	// Waits says the handler may return Wait. The worker then keeps at
	// most MaxParked waiting messages (MaxParkedPerScope of one scope) and
	// hands the newest beyond that back to the stream, counted in
	// BucketReturns, which the process's NATS user must be allowed; the
	// server's MaxDeliver is off and the worker keeps it, hand-backs not
	// counted (returns.go).
	Waits bool
	// MaxParked and MaxParkedPerScope bound the waiting messages a worker
	// holds (0: DefaultMaxParked).
	MaxParked, MaxParkedPerScope int
	// MaxAckPending is the consumer's, across every process (0: 65,536).
	MaxAckPending int
	// PeekSubjects, on a stream whose subjects name the tenant (tasks:
	// herald.tasks.<tenant>), lets a crowded window look past itself for
	// other tenants' messages (peek.go).
	PeekSubjects []string
	// PeekShared are subjects whose messages name their tenant inside
	// (herald.tasks, the tenant in the task): a crowded window reads past
	// itself on them too, indexing their messages by tenant as it goes
	// (peek.go).
	PeekShared []string
}

// DefaultMaxParked is how many waiting messages a worker holds, in all and
// of one scope, by its look-ahead window: as many as the window in all, a
// quarter of it for one scope (at least 16), so a flood beyond one
// tenant's limit holds neither this process's memory nor the consumer's
// MaxAckPending (65,536, shared by every process and tenant).
func DefaultMaxParked(lookahead int) (total, perScope int) {
	return lookahead, max(lookahead/4, 16)
}

func (s *ConsumerSpec) defaults() {
	if s.Concurrency <= 0 {
		s.Concurrency = 16
	}
	if s.MaxDeliver <= 0 {
		s.MaxDeliver = 5
	}
	if s.AckWait <= 0 {
		// Short, so a crashed process's messages are redelivered within
		// seconds; long handlers are kept alive by keepAlive.
		s.AckWait = DefaultAckWait
	}
	if s.Lookahead <= 0 {
		s.Lookahead = DefaultLookahead(s.Concurrency)
	}
	total, perScope := DefaultMaxParked(s.Lookahead)
	if s.MaxParked <= 0 {
		s.MaxParked = total
	}
	if s.MaxParkedPerScope <= 0 {
		s.MaxParkedPerScope = min(perScope, s.MaxParked)
	}
	if s.MaxAckPending <= 0 {
		s.MaxAckPending = 1 << 16 // across every process: 4,096 held two gateways of 2,048 (issue 29)
	}
	if len(s.RetryDelays) == 0 {
		s.RetryDelays = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 5 * time.Second}
	}
}

func (s ConsumerSpec) config() jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       s.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.AckWait,
		MaxDeliver:    s.MaxDeliver,
		MaxAckPending: s.MaxAckPending,
	}
	if s.Waits {
		// a waiting message handed back is delivered again: the worker
		// counts failures itself (returns.go); and it stays on the
		// consumer's pending list until then (a nak does not take it
		// off), where a flood of one tenant's would fill MaxAckPending
		// and hold back every other tenant's work: each worker bounds
		// what it holds instead (Lookahead, MaxParked)
		cfg.MaxDeliver = -1
		cfg.MaxAckPending = -1
	}
	if len(s.FilterSubjects) == 1 {
		cfg.FilterSubject = s.FilterSubjects[0]
	} else {
		cfg.FilterSubjects = s.FilterSubjects
	}
	if s.DeliverNew {
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	return cfg
}

// Worker runs a Handler over a consumer until stopped.
type Worker struct {
	spec    ConsumerSpec
	js      jetstream.JetStream
	handler Handler
	log     zerolog.Logger
	// stopPulls ends the pull requests waiting for a message.
	stopPulls context.CancelFunc
	// idle holds a token for each handler free to take a message.
	idle chan struct{}
	// space holds a token for each message the window may still take;
	// window is the fair queue they wait in (fair.go), ready wakes the
	// dispatcher when a message joins it.
	space  chan struct{}
	qmu    sync.Mutex
	window *fairQueue
	ready  chan struct{}
	// pulling counts the pullers, the dispatcher and the keeper: once
	// they are done, nothing more joins the window.
	pulling sync.WaitGroup
	// handling is the context messages are handled in; jobs carries a
	// message to a handler goroutine waiting for one (handlers.go).
	handling context.Context
	jobs     chan job
	mu       sync.Mutex
	waiting  int // handler goroutines waiting on jobs not yet claimed
	stopping chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	unwatch  func()
	// unanchor stops renewing the stream's anchor (anchor.go).
	unanchor func()
	// returns counts the hand-backs of waiting messages (nil unless
	// spec.Waits; returns.go); returnsWarned spaces its warnings.
	returns       *returnCounts
	returnsWarned time.Time
	// peeked holds the stream sequences read past the window and not done;
	// peeking counts them by tenant; failedPeeks holds those whose handler
	// failed, left to the consumer's deliveries (peek.go). Under qmu.
	peeked      map[uint64]bool
	peeking     map[string]int
	failedPeeks map[uint64]bool
	// shared indexes the messages of each PeekShared subject by tenant;
	// only the peek loop touches it.
	shared map[string]*sharedScan
}

// StartWorker creates (or binds to) the durable consumer and starts handling
// messages. Stop it with Stop, which waits for in-flight handlers.
func StartWorker(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, h Handler, log zerolog.Logger) (*Worker, error) {
	spec.defaults()
	cons, err := js.CreateOrUpdateConsumer(ctx, spec.Stream, spec.config())
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", spec.Durable, spec.Stream, err)
	}
	handling, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &Worker{spec: spec, js: js, handler: h, cancel: cancel, handling: handling,
		idle: make(chan struct{}, spec.Concurrency), jobs: make(chan job, spec.Concurrency), stopping: make(chan struct{}),
		space: make(chan struct{}, spec.Lookahead), window: newFairQueue(spec.Weight), ready: make(chan struct{}, 1),
		log:    log.With().Str("stream", spec.Stream).Str("consumer", spec.Durable).Logger(),
		peeked: map[uint64]bool{}, peeking: map[string]int{}, failedPeeks: map[uint64]bool{}, shared: map[string]*sharedScan{}}
	if spec.Waits {
		w.returns = newReturnCounts(js)
		w.window.maxParked, w.window.maxPerScope = spec.MaxParked, spec.MaxParkedPerScope
	}
	for range spec.Concurrency {
		w.idle <- struct{}{}
	}
	for range spec.Lookahead {
		w.space <- struct{}{}
	}
	w.unwatch = telemetry.WatchConsumer(spec.Stream, spec.Durable, backlog(cons))
	w.unanchor = KeepAnchor(js, spec.Stream, w.log)
	pulling, stopPulls := context.WithCancel(context.WithoutCancel(ctx))
	w.stopPulls = stopPulls
	for range pullers {
		w.pulling.Add(1)
		go w.pull(pulling, cons)
	}
	w.pulling.Add(2)
	go w.dispatchLoop()
	go w.keep()
	if len(spec.PeekSubjects) > 0 || len(spec.PeekShared) > 0 {
		w.pulling.Add(1)
		go w.peekLoop(cons)
	}
	return w, nil
}

// pull asks for messages only once the window (fair.go) has room for them,
// one pull request for as much room as there is (reserveMore), so no
// message waits in a client buffer the worker does not keep alive: a buffer
// the client drops from on overflow once held a message until AckWait (then
// 30 s for the tool runner). Messages in the window are kept alive.
//
// Each pull is its own request (Fetch), answered by a message, the server's
// timeout or two missed heartbeats. The client's message iterator, asked
// for one message at a time, sometimes never sent the next request: it skips
// one while it is still sending the previous one, and a message answering
// that previous request quickly (a backlog, a busy shared connection) ends
// it before it is done, so the worker sat idle beside a full stream until
// two heartbeats were missed, ~4 s (TestWorkerNeverLosesAPullOverABacklog).
// Short pulls with frequent heartbeats notice a restarted or failed-over
// server within seconds rather than the client's default half-minute.
func (w *Worker) pull(pulling context.Context, cons jetstream.Consumer) {
	defer w.pulling.Done()
	for {
		select {
		case <-w.space:
		case <-w.stopping:
			return
		}
		reserved := 1 + w.reserveMore(maxPullBatch-1)
		got, err := w.fetch(pulling, cons, reserved)
		for range reserved - got {
			w.space <- struct{}{}
		}
		if got > 0 {
			continue
		}
		if pulling.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return
		}
		if err != nil && !w.pullFailed(err) {
			select {
			case <-time.After(pullRetryDelay):
			case <-w.stopping:
				return
			}
		}
	}
}

// reserveMore takes up to n more of the window's room without waiting, so
// that one pull asks for as many messages as the window can take: under
// load a pull of one message each was what capped a worker's throughput
// (each costs a round trip to the server).
func (w *Worker) reserveMore(n int) int {
	for got := 0; got < n; got++ {
		select {
		case <-w.space:
		default:
			return got
		}
	}
	return n
}

// fetch asks the server for up to n messages, room in the window reserved
// for each, and puts each in the window as it comes, until n came, the
// server's timeout or two missed heartbeats; it returns how many came.
func (w *Worker) fetch(pulling context.Context, cons jetstream.Consumer, n int) (int, error) {
	ctx, cancel := context.WithTimeout(pulling, pullExpiry)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(ctx), jetstream.FetchHeartbeat(pullHeartbeat))
	if err != nil {
		return 0, err
	}
	got := 0
	for msg := range batch.Messages() {
		// A message that came as the pull was stopped joins the window
		// all the same (room is reserved for it); Stop hands it back.
		got++
		w.enqueue(msg)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return got, err
	}
	return got, nil
}

// pullFailed logs a failed pull; it reports whether pulling again at once is
// right.
func (w *Worker) pullFailed(err error) bool {
	if errors.Is(err, jetstream.ErrNoHeartbeat) {
		// The server forgot the pull request (a restart); pull again.
		w.log.Debug().Err(err).Msg("pull request lost; pulling again")
		return true
	}
	w.log.Warn().Err(err).Msg("fetching messages failed; retrying")
	return false
}

func (w *Worker) handle(ctx context.Context, j job) {
	msg := j.msg
	if w.returns != nil && j.delivered > uint64(w.spec.MaxDeliver) && w.neverAnswered(ctx, msg) {
		return
	}
	stop := w.keepAlive(msg)
	hctx := WithTenant(telemetry.Extract(ctx, msg.Headers()), j.tenant)
	var through *throughFlag
	if j.scope != "" {
		through = &throughFlag{}
		hctx = context.WithValue(hctx, throughKey{}, func() { w.letThrough(j, through) })
	}
	err := w.call(hctx, msg)
	stop()
	if through.passed() {
		j.scope = "" // the others waiting were told already
	}
	if w.settled(j, err) {
		return
	}
	if err == nil {
		claimed := msg.Headers().Get(HeaderClaim) != "" && isWorkQueue(w.spec.Stream)
		if ackErr := ack(ctx, msg, claimed); ackErr != nil {
			w.log.Warn().Err(ackErr).Str("subject", msg.Subject()).Msg("ack failed; message will be redelivered")
			return
		}
		if claimed {
			// The acknowledged message is gone from its work queue; its
			// claimed payload would otherwise wait out the claim TTL.
			if dropErr := DropClaim(ctx, w.js, msg.Subject(), msg.Headers()); dropErr != nil {
				w.log.Warn().Err(dropErr).Str("subject", msg.Subject()).Msg("claimed payload not deleted; it expires with the claim store's TTL")
			}
		}
		return
	}
	meta, _ := msg.Metadata()
	delivered := uint64(1)
	if meta != nil {
		delivered = meta.NumDelivered
	}
	if !IsPermanent(err) && delivered >= uint64(w.spec.MaxDeliver) && w.returns != nil {
		// deliveries that handed it back while it waited do not count
		failed, ok := w.failures(ctx, msg, delivered)
		if !ok {
			_ = msg.NakWithDelay(w.delay(delivered))
			return
		}
		delivered = failed
	}
	if IsPermanent(err) || delivered >= uint64(w.spec.MaxDeliver) {
		reason := err.Error()
		if !IsPermanent(err) {
			reason = fmt.Sprintf("failed %d deliveries: %s", delivered, reason)
		}
		w.log.Warn().Err(err).Str("subject", msg.Subject()).Uint64("deliveries", delivered).Msg("message dead-lettered")
		if dlErr := DeadLetter(ctx, w.js, msg, reason); dlErr != nil {
			w.log.Error().Err(dlErr).Msg("dead-lettering failed; message will be redelivered")
			_ = msg.NakWithDelay(w.delay(delivered))
		}
		return
	}
	w.log.Debug().Err(err).Str("subject", msg.Subject()).Uint64("deliveries", delivered).Msg("handler failed; will retry")
	_ = msg.NakWithDelay(w.delay(delivered))
}

// neverAnswered dead-letters a message delivered more than MaxDeliver times,
// hand-backs aside, without an answer (the processes handling it died or
// let its AckWait pass): with Waits the server no longer stops delivering
// it. It reports whether msg was dead-lettered.
func (w *Worker) neverAnswered(ctx context.Context, msg jetstream.Msg) bool {
	meta, err := msg.Metadata()
	if err != nil || meta.NumDelivered <= uint64(w.spec.MaxDeliver) {
		return false
	}
	failed, ok := w.failures(ctx, msg, meta.NumDelivered-1) // deliveries before this one
	if !ok || failed < uint64(w.spec.MaxDeliver) {
		return false
	}
	reason := fmt.Sprintf("delivered %d times (%d of them handed back while waiting for a limit) without an answer", meta.NumDelivered-1, meta.NumDelivered-1-failed)
	w.log.Warn().Str("subject", msg.Subject()).Uint64("deliveries", meta.NumDelivered).Msg("message dead-lettered")
	if err := DeadLetter(ctx, w.js, msg, reason); err != nil {
		w.log.Error().Err(err).Msg("dead-lettering failed; message will be redelivered")
		_ = msg.NakWithDelay(w.delay(meta.NumDelivered))
	}
	return true
}

// ack acknowledges a handled message. Every handler tolerates a redelivery
// (its effects are stored under deterministic ids and looked up again), so
// a plain ack, which waits for nothing, is enough; only a message whose
// claimed payload is deleted next waits for the server to confirm, since a
// redelivery after that deletion could not be read.
func ack(ctx context.Context, msg jetstream.Msg, confirm bool) error {
	if confirm {
		return msg.DoubleAck(ctx)
	}
	return msg.Ack()
}

// call runs the handler, turning a panic into an error so one bad message
// cannot take the service down.
func (w *Worker) call(ctx context.Context, msg jetstream.Msg) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error().Interface("panic", r).Str("stack", string(debug.Stack())).Msg("handler panicked")
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	if msg, err = resolveMsg(ctx, w.js, msg); err != nil {
		return err
	}
	return w.handler(ctx, msg)
}

// keepAlive tells the server the message is still being worked on, so a long
// handler is not redelivered to another process while it runs.
// Its timer runs no goroutine until a handler outlives a third of AckWait,
// which most never do.
func (w *Worker) keepAlive(msg jetstream.Msg) (stop func()) {
	every := w.spec.AckWait / 3
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			_ = msg.InProgress()
			t.Reset(every)
		}
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

func (w *Worker) delay(delivered uint64) time.Duration {
	i := int(delivered) - 1
	if i >= len(w.spec.RetryDelays) {
		i = len(w.spec.RetryDelays) - 1
	}
	if i < 0 {
		i = 0
	}
	return w.spec.RetryDelays[i]
}

// Stop stops fetching, then waits for in-flight handlers until ctx ends, after
// which their contexts are cancelled (their messages will be redelivered).
func (w *Worker) Stop(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.once.Do(func() {
		w.unwatch()
		w.unanchor()
		close(w.stopping)
		w.stopPulls()
		w.pulling.Wait()
		w.handBack()
	})
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
		w.cancel()
		return nil
	case <-ctx.Done():
		w.cancel()
		<-done
		return ctx.Err()
	}
}
