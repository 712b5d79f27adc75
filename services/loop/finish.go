package loop

import (
	"context"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// finish ends the turn: the durable result, the DONE state and, for a
// delegated child, the answer to its parent's delegate_task call.
func (s *Service) finish(t *txn, reason, final, errText string) error {
	st := t.st
	if final == "" && errText != "" {
		final = "The task could not be completed: " + errText
	}
	res := proto.Result{
		SessionID: st.SessionID, TaskID: st.TaskID, FinalResponse: final, ExitReason: reason,
		APICalls: st.APICalls, Iterations: st.Step, CostUSD: st.CostUSD, Error: errText,
		Usage: st.Usage, ContinuedAs: st.LogSID, CostStatus: st.costStatus(), UnpricedModels: st.Pricing.UnpricedModels,
	}
	sid, turn, bound := st.SessionID, st.Turn, st.BoundTenant
	t.effect(func(ctx context.Context, b *bus.Batch) {
		b.JSON(ctx, bus.SessionResult(sid), resultID(sid, turn), res)
		if bound != "" {
			b.JSON(ctx, bus.TenantSessionResult(bound, sid), "tenant-"+resultID(sid, turn), res)
		}
	})
	if st.ParentSessionID != "" && st.ParentCallID != "" {
		s.answerParent(t, res)
	}
	if st.SlotTenant != "" {
		slot, taskID := st.SlotTenant, st.TaskID
		t.afterCommit(func() { s.releaseTurn(slot, taskID) })
		st.SlotTenant = ""
	}
	st.Status = statusIdle
	st.LastExit = reason
	st.Pending = nil
	t.state(proto.StateDone)
	t.event(proto.Event{Type: proto.EventResult, Result: &res})
	return nil
}

func resultID(sid string, turn int) string {
	return "result:" + sid + ":" + itoa(turn)
}

// answerParent reports a child session's outcome as the result of the
// parent's delegate_task call, with the child's cost and usage.
func (s *Service) answerParent(t *txn, res proto.Result) {
	st := t.st
	content := res.FinalResponse
	if res.ExitReason != proto.ExitTextResponse {
		content = "The subagent stopped (" + res.ExitReason + "): " + content
	}
	tr := &heraldpb.ToolResult{
		CallId: st.ParentCallID, SessionId: st.ParentSessionID, Tool: delegateTool, Content: content,
		IsError: res.ExitReason != proto.ExitTextResponse, Status: "ok", CostUsd: res.CostUSD,
		ApiCalls: int32(res.APICalls), Runner: "loop", Pricing: st.pricingProto(), ChildSessionId: st.SessionID,
		Usage: &heraldpb.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens,
			CacheReadTokens: res.Usage.CacheReadTokens, CacheWriteTokens: res.Usage.CacheWriteTokens,
			ReasoningTokens: res.Usage.ReasoningTokens},
	}
	parent, call := st.ParentSessionID, st.ParentCallID
	t.effect(func(ctx context.Context, b *bus.Batch) {
		b.Proto(ctx, bus.ToolResult(parent, call), parent+":"+call, tr)
	})
}
