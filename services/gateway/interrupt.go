package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
)

// inflight knows the calls being served per session, so an interrupt can
// cancel them at once.
type inflight struct {
	mu sync.Mutex
	// calls holds each session's calls in flight, with their task's id.
	calls map[string]map[*context.CancelCauseFunc]string
}

func newInflight() *inflight {
	return &inflight{calls: map[string]map[*context.CancelCauseFunc]string{}}
}

// track derives a cancellable context for one call of session sid, made
// for task taskID.
func (f *inflight) track(ctx context.Context, sid, taskID string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	f.mu.Lock()
	if f.calls[sid] == nil {
		f.calls[sid] = map[*context.CancelCauseFunc]string{}
	}
	f.calls[sid][key] = taskID
	f.mu.Unlock()
	return ctx, func() {
		f.mu.Lock()
		delete(f.calls[sid], key)
		if len(f.calls[sid]) == 0 {
			delete(f.calls, sid)
		}
		f.mu.Unlock()
		cancel(nil)
	}
}

// interrupt cancels the calls of session sid (only task taskID's when it
// is set) and reports how many there were.
func (f *inflight) interrupt(sid, taskID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for cancel, task := range f.calls[sid] {
		if taskID == "" || task == taskID {
			(*cancel)(errInterrupted)
			n++
		}
	}
	return n
}

// onInterrupt handles herald.session.<sid>.interrupt (any body; one naming
// a task stops only that task's calls).
func (s *Service) onInterrupt(msg *nats.Msg) {
	parts := strings.Split(msg.Subject, ".")
	if len(parts) != 4 {
		return
	}
	var in proto.Interrupt
	_ = json.Unmarshal(msg.Data, &in)
	if n := s.inflight.interrupt(parts[2], in.TaskID); n > 0 {
		s.log.Info().Str("session_id", parts[2]).Int("calls", n).Msg("interrupt cancelled calls in flight")
	}
}

// interrupted reports whether ctx ended because of a user interrupt.
func interrupted(ctx context.Context) bool {
	return context.Cause(ctx) == errInterrupted
}
