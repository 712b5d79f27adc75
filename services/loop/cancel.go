package loop

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
)

// errNotStarted redelivers an interrupt naming a task whose turn has not
// begun, in case that turn is being committed as the interrupt arrives.
var errNotStarted = errors.New("the interrupted task has not started yet")

// earlyInterruptDeliveries is how often an interrupt naming a task not yet
// started is tried (about 0.6 s with the control consumer's delays) before
// it is left to the task's start to find.
const earlyInterruptDeliveries = 3

// notStarted answers an interrupt naming a task whose turn is not going:
// one not started yet is found by interruptedBeforeStart when it starts
// (the redeliveries cover a turn committed as the interrupt arrived); one
// that already ended, or another task's turn, is left alone.
func (s *Service) notStarted(t *txn, delivered uint64) error {
	if delivered < earlyInterruptDeliveries {
		return errNotStarted
	}
	t.noop = true
	return nil
}

// interruptedBeforeStart reports whether an interrupt naming task arrived
// before its turn began (an API cancel while the task waited in its
// stream): the last interrupt on the session's subjects names it.
func (s *Service) interruptedBeforeStart(ctx context.Context, task proto.Task) bool {
	subjects := []string{bus.SessionInterrupt(task.SessionID)}
	if task.BoundTenant != "" {
		subjects = append(subjects, bus.TenantSessionInterrupt(task.BoundTenant, task.SessionID))
	}
	for _, subject := range subjects {
		m, err := bus.LastOnSubject(ctx, s.deps.JS, bus.StreamControl, subject)
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				s.log.Warn().Err(err).Str("task_id", task.TaskID).Msg("early interrupts not checked")
			}
			continue // none, or unreadable: the task runs, as it would have
		}
		var in proto.Interrupt
		if json.Unmarshal(m.Data, &in) == nil && in.TaskID == task.TaskID {
			return true
		}
	}
	return false
}
