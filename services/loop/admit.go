package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
)

// admitTurn holds a task to its tenant's max_concurrent_sessions (the api's
// max_concurrent_runs: one limit), counted across every loop and api process
// (bus.Slots). A task beyond it waits, never fails: it is left in its
// worker's window (bus.Wait) and tried again as slots free, oldest first,
// and its session's events say queued, with its position, each time that
// changes. It returns the tenant whose slot the turn holds ("" for none).
// A run the api admitted holds its slot already, under the same id. A
// subagent's task runs within its parent's turn, whose slot it shares:
// made to wait for a slot, it could wait for its own parent forever.
func (s *Service) admitTurn(ctx context.Context, task proto.Task, published time.Time) (string, error) {
	if !s.needsSlot(task) {
		return "", nil
	}
	tenant := firstNonEmpty(task.Tenant, s.cfg.Tenant)
	limit := s.deps.Config.Tenants[tenant].SessionLimit()
	scope := bus.SessionsScope(tenant)
	place, err := s.slots.Acquire(ctx, scope, limit, task.TaskID, published.UnixNano())
	if err != nil {
		return "", err
	}
	if place.Position == 0 {
		return tenant, nil
	}
	if place.Moved {
		ev := proto.Event{Type: proto.EventQueued, SessionID: task.SessionID, TaskID: task.TaskID,
			Position: place.Position, Limit: proto.LimitSessions, BoundTenant: task.BoundTenant,
			Message: fmt.Sprintf("tenant %s has %d sessions going, its limit; this one starts when a slot frees", tenant, limit)}
		if err := bus.PublishEvent(s.deps.NC, ev); err != nil {
			s.log.Warn().Err(err).Str("session_id", task.SessionID).Msg("queued event not published")
		}
	}
	return "", bus.WaitAt(scope, place.Position, fmt.Errorf("tenant %s is at max_concurrent_sessions %d", tenant, limit))
}

// needsSlot says whether task's turn must hold a slot under its tenant's
// max_concurrent_sessions.
func (s *Service) needsSlot(task proto.Task) bool {
	tenant := firstNonEmpty(task.Tenant, s.cfg.Tenant)
	return tenant != "" && s.deps.Config.Tenants[tenant].SessionLimit() > 0 && task.ParentSessionID == ""
}

// releaseTurn frees the turn's session slot; best effort (a slot not
// released frees itself after bus.HeldLease).
func (s *Service) releaseTurn(tenant, taskID string) {
	if tenant == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.slots.Release(ctx, bus.SessionsScope(tenant), taskID); err != nil {
		s.log.Warn().Err(err).Str("tenant", tenant).Str("task_id", taskID).Msg("session slot not released; it frees itself after its lease")
	}
}

// leaveQueue drops a task's place among its tenant's waiting sessions (a
// run cancelled while it waited); best effort, as releaseTurn.
func (s *Service) leaveQueue(task proto.Task) {
	if !s.needsSlot(task) {
		return
	}
	s.releaseTurn(firstNonEmpty(task.Tenant, s.cfg.Tenant), task.TaskID)
}
