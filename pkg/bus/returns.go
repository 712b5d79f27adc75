package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A worker whose handler may Wait (ConsumerSpec.Waits) bounds the messages
// it keeps waiting (fair.go) and hands the rest back to the stream, to be
// delivered again later. Every delivery counts in the server's count, so
// for such a consumer the server's MaxDeliver is off and the worker keeps
// it: a message's failures are its deliveries less the times it was handed
// back, which are counted in the bucket herald_returns under the message's
// stream, consumer and sequence. Nothing is read or written there for a
// message that was never handed back, except when its deliveries reach
// MaxDeliver.

// returnCounts are the hand-back counts in BucketReturns.
type returnCounts struct {
	b *LazyBucket
}

func newReturnCounts(js jetstream.JetStream) *returnCounts {
	return &returnCounts{b: NewLazyBucket(js, BucketReturns)}
}

func returnKey(meta *jetstream.MsgMetadata) string {
	return fmt.Sprintf("returned.%s.%s.%d", Token(meta.Stream), Token(meta.Consumer), meta.Sequence.Stream)
}

// add counts one more hand-back of msg and returns the new count.
func (r *returnCounts) add(ctx context.Context, msg jetstream.Msg) (int, error) {
	kv, key, err := r.open(ctx, msg)
	if err != nil {
		return 0, err
	}
	for range 20 {
		n, rev, err := r.read(ctx, kv, key)
		if err != nil {
			return 0, err
		}
		val := []byte(strconv.Itoa(n + 1))
		if rev == 0 {
			_, err = kv.Create(ctx, key, val)
		} else {
			_, err = kv.Update(ctx, key, val, rev)
		}
		if err == nil {
			return n + 1, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return 0, fmt.Errorf("returns %s: %w", key, err)
		}
	}
	return 0, ErrSlotsBusy
}

// count is how often msg was handed back.
func (r *returnCounts) count(ctx context.Context, msg jetstream.Msg) (int, error) {
	kv, key, err := r.open(ctx, msg)
	if err != nil {
		return 0, err
	}
	n, _, err := r.read(ctx, kv, key)
	return n, err
}

// open is the bucket and msg's key in it.
func (r *returnCounts) open(ctx context.Context, msg jetstream.Msg) (jetstream.KeyValue, string, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return nil, "", err
	}
	kv, err := r.b.Open(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("returns bucket: %w", err)
	}
	return kv, returnKey(meta), nil
}

func (r *returnCounts) read(ctx context.Context, kv jetstream.KeyValue, key string) (int, uint64, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("returns %s: %w", key, err)
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil {
		n = 0 // unreadable: counts as never handed back
	}
	return n, e.Revision(), nil
}

// handBackWaiting returns a waiting message the window has no room for to
// the stream, its hand-back counted first; false if it could not be counted
// (it is then kept waiting in the window: handed back uncounted, its
// deliveries could dead-letter it).
func (w *Worker) handBackWaiting(j job) bool {
	if j.peeked {
		// read past the window, never delivered: left in the stream, it
		// spends no delivery, so there is nothing to count
		_ = j.msg.Nak()
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := w.returns.add(ctx, j.msg)
	if err != nil {
		w.warnReturns(err)
		return false
	}
	w.qmu.Lock()
	delay := w.window.returnDelay(j, n)
	w.qmu.Unlock()
	if err := j.msg.NakWithDelay(delay); err != nil {
		// its AckWait brings it back all the same, counted
		w.log.Debug().Err(err).Msg("waiting message not handed back; it returns after its AckWait")
	}
	return true
}

// failures is how many of msg's deliveries (delivered) were not hand-backs
// of a waiting message; ok is false when that could not be read.
func (w *Worker) failures(ctx context.Context, msg jetstream.Msg, delivered uint64) (uint64, bool) {
	if w.returns == nil {
		return delivered, true
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	n, err := w.returns.count(rctx, msg)
	if err != nil {
		w.warnReturns(err)
		return 0, false
	}
	return delivered - min(delivered, uint64(n)), true
}

func (w *Worker) warnReturns(err error) {
	w.qmu.Lock()
	now := time.Now()
	quiet := now.Sub(w.returnsWarned) < time.Minute
	if !quiet {
		w.returnsWarned = now
	}
	w.qmu.Unlock()
	if !quiet {
		w.log.Warn().Err(err).Msg("hand-back counts (bucket herald_returns) not read or written; waiting messages stay in the window (run herald declare?)")
	}
}
