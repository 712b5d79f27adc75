package bus

// A worker's handler goroutines outlive the message they were started for:
// one that is done waits on jobs for the next. A goroutine started per
// message began with a small stack and grew it (copying it each time) to the
// depth a handler reaches, a model call or a transition: 3.5 % of a step's
// CPU in a `herald up` profile (docs/BENCHMARKS.md). There are never more of
// them than the worker's concurrency.

// dispatch hands msg to a waiting handler goroutine, or starts one. It claims
// the goroutine before sending, so every message sent has a goroutine of its
// own to take it, never one still busy with another.
func (w *Worker) dispatch(msg job) {
	w.mu.Lock()
	claimed := w.waiting > 0
	if claimed {
		w.waiting--
	}
	w.mu.Unlock()
	if claimed {
		w.jobs <- msg // buffered for every handler: never blocks
		return
	}
	w.wg.Add(1)
	go w.serve(msg)
}

// serve handles msg, then each message dispatched to it, until the worker
// stops. A message claimed for it as the worker stops is still handled.
func (w *Worker) serve(msg job) {
	defer w.wg.Done()
	for {
		w.handle(w.handling, msg)
		// counted as waiting before its token is back: a puller that takes
		// the token finds this goroutine to claim and starts no other
		waits := w.await()
		w.idle <- struct{}{}
		if !waits {
			return
		}
		select {
		case msg = <-w.jobs:
		case <-w.stopping:
			if w.leave() {
				return
			}
			msg = <-w.jobs // every goroutine waiting is claimed: one is for this one
		}
	}
}

// await makes the goroutine one that dispatch may claim; false once the
// worker is stopping.
func (w *Worker) await() bool {
	select {
	case <-w.stopping:
		return false
	default:
	}
	w.mu.Lock()
	w.waiting++
	w.mu.Unlock()
	return true
}

// leave takes one unclaimed waiting goroutine off the count, so that this one
// can stop; false when every one waiting is claimed.
func (w *Worker) leave() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == 0 {
		return false
	}
	w.waiting--
	return true
}
