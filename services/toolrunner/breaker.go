package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// The circuit breaker counts consecutive failures of one tool in one session
// in the shared state bucket, so every runner sees the same count. At the
// threshold the tool is disabled for the rest of the session.

func (s *Service) breakerOpen(req *heraldpb.ToolCallRequest, streak failureStreak) (outcome, bool) {
	n, err := streak.n, streak.err
	if err != nil || n < s.cfg.BreakerThreshold {
		return outcome{}, false
	}
	return outcome{status: statusError, content: fmt.Sprintf(
		"the %s tool is disabled for this session: it failed %d times in a row. Use another tool or approach, or finish with what you have.",
		req.GetTool(), n)}, true
}

// countsAsFailure: a failure of the tool itself, not a refusal or a model mistake
// the model can correct by itself.
func countsAsFailure(o outcome) bool {
	return o.status == statusError || o.status == statusTimeout
}

// failureStreak is a session's count of a tool's failures in a row, as read
// when a call began.
type failureStreak struct {
	n   int
	err error
}

// readStreak starts reading the call's failure streak and returns a func
// that waits for it.
func (s *Service) readStreak(ctx context.Context, req *heraldpb.ToolCallRequest) func() failureStreak {
	return inBackground(func() failureStreak {
		n, _, err := s.failures(ctx, req.GetSessionId(), req.GetTool())
		return failureStreak{n: n, err: err}
	})
}

// inBackground starts f and returns a func that waits for its value (as
// often as it is called).
func inBackground[T any](f func() T) func() T {
	done := make(chan T, 1)
	go func() { done <- f() }()
	return sync.OnceValue(func() T { return <-done })
}

// recordOutcome moves the breaker: a failure counts up, a success resets.
// A success after a streak read as none has nothing to reset (a failure of
// a call running beside it may be counted against the next one).
func (s *Service) recordOutcome(ctx context.Context, req *heraldpb.ToolCallRequest, o outcome, streak failureStreak) {
	if o.status == statusDenied || o.status == statusUnknown || o.correctable {
		return
	}
	if !countsAsFailure(o) && streak.err == nil && streak.n == 0 {
		return
	}
	for attempt := 0; attempt < 5; attempt++ {
		err := s.updateFailures(ctx, req.GetSessionId(), req.GetTool(), countsAsFailure(o))
		if err == nil || ctx.Err() != nil {
			return
		}
	}
}

func (s *Service) updateFailures(ctx context.Context, sid, tool string, failed bool) error {
	n, rev, err := s.failures(ctx, sid, tool)
	if err != nil {
		return err
	}
	key := breakerKey(sid, tool)
	if !failed {
		if rev == 0 || n == 0 {
			return nil
		}
		_, err = s.state.Update(ctx, key, []byte("0"), rev)
		return err
	}
	val := []byte(strconv.Itoa(n + 1))
	if rev == 0 {
		_, err = s.state.Create(ctx, key, val)
	} else {
		_, err = s.state.Update(ctx, key, val, rev)
	}
	return err
}

func (s *Service) failures(ctx context.Context, sid, tool string) (int, uint64, error) {
	e, err := s.state.Get(ctx, breakerKey(sid, tool))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	n, _ := strconv.Atoi(string(e.Value()))
	return n, e.Revision(), nil
}
