package gateway

import (
	"context"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// inflight knows the calls being served per session, so an interrupt can
// cancel them at once.
type inflight struct {
	mu    sync.Mutex
	calls map[string]map[*context.CancelCauseFunc]struct{}
}

func newInflight() *inflight {
	return &inflight{calls: map[string]map[*context.CancelCauseFunc]struct{}{}}
}

// track derives a cancellable context for one call of session sid.
func (f *inflight) track(ctx context.Context, sid string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	f.mu.Lock()
	if f.calls[sid] == nil {
		f.calls[sid] = map[*context.CancelCauseFunc]struct{}{}
	}
	f.calls[sid][key] = struct{}{}
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

// interrupt cancels every call of session sid and reports how many there were.
func (f *inflight) interrupt(sid string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for cancel := range f.calls[sid] {
		(*cancel)(errInterrupted)
	}
	return len(f.calls[sid])
}

// onInterrupt handles herald.session.<sid>.interrupt (any body).
func (s *Service) onInterrupt(msg *nats.Msg) {
	parts := strings.Split(msg.Subject, ".")
	if len(parts) != 4 {
		return
	}
	if n := s.inflight.interrupt(parts[2]); n > 0 {
		s.log.Info().Str("session_id", parts[2]).Int("calls", n).Msg("interrupt cancelled calls in flight")
	}
}

// interrupted reports whether ctx ended because of a user interrupt.
func interrupted(ctx context.Context) bool {
	return context.Cause(ctx) == errInterrupted
}
