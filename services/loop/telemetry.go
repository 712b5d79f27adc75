package loop

import (
	"time"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto"
)

// observe records the turn boundaries a committed transition crossed: the
// turn counters, and the turn's `invoke_agent` span once it has ended
// (recorded here, by whichever loop process ends the turn, with the ids
// chosen when it started).
func (s *Service) observe(t *txn) {
	for _, ev := range t.events {
		switch {
		case ev.Type == proto.EventState && ev.State == proto.StateIdle:
			telemetry.TurnStarted()
		case ev.Type == proto.EventResult && ev.Result != nil:
			telemetry.TurnFinished(ev.Result.ExitReason)
			s.endTurnSpan(t.st, ev.Result)
		}
	}
}

func (s *Service) endTurnSpan(st *State, res *proto.Result) {
	if st.Trace == "" {
		return
	}
	u := res.Usage
	telemetry.EndTurn(telemetry.Turn{
		Traceparent: st.Trace, Parent: st.TraceParent, Started: time.UnixMilli(st.TurnStartedMs),
		SessionID: st.SessionID, TaskID: st.TaskID, ParentSessionID: st.ParentSessionID,
		Tenant: st.Tenant, Model: st.Model, ExitReason: res.ExitReason, Error: res.Error,
		Iterations: res.Iterations, APICalls: res.APICalls,
		InputTokens:  u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens,
		OutputTokens: u.OutputTokens, CostUSD: res.CostUSD,
	})
}
