package loop

import (
	"context"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	gproto "google.golang.org/protobuf/proto"
)

// sessionStarted publishes on_session_start for a session's first turn.
func (s *Service) sessionStarted(st *State, task proto.Task) {
	s.hooks.SessionStarted(hooks.SessionStart{SessionID: st.SessionID, TaskID: st.TaskID, Tenant: st.Tenant,
		Model: st.Model, Prompt: task.Prompt})
}

// withHookContext asks pre_llm_call for context for this model call and
// returns req with it fenced into the turn's user message, as recalled
// memory is: sent with this call only, never part of the transcript. It
// runs as the request is published, once per request, not once per
// (possibly speculative) decision.
func (s *Service) withHookContext(ctx context.Context, call hooks.LLMCall, req *heraldpb.LLMRequest) *heraldpb.LLMRequest {
	i := turnUserMessage(req.GetMessages())
	if i < 0 {
		return req
	}
	fenced := s.hooks.LLMContextFor(ctx, call)
	if fenced == "" {
		return req
	}
	out := gproto.Clone(req).(*heraldpb.LLMRequest)
	out.Messages[i].Content = fenced + "\n\n" + out.Messages[i].Content
	return out
}

// llmCallOf is the pre_llm_call request of the model call being decided;
// the turn's prompt is its last user message as the transcript keeps it.
func llmCallOf(st *State, history []*heraldpb.ChatMessage) hooks.LLMCall {
	call := hooks.LLMCall{SessionID: st.SessionID, TaskID: st.TaskID, Tenant: st.Tenant, Turn: st.Turn, Step: st.Step}
	if i := turnUserMessage(history); i >= 0 {
		call.UserMessage = history[i].Content
	}
	return call
}

// turnUserMessage is the index of the user message recall is added to.
func turnUserMessage(msgs []*heraldpb.ChatMessage) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" && !msgs[i].Scaffolding {
			return i
		}
	}
	return -1
}

// policyRefusesChild asks pre_tool_call about a delegate_task call, the one
// tool the loop runs itself. It is asked as the child is about to be
// started (an effect, so once per dispatch, not per speculative decision).
func (s *Service) policyRefusesChild(ctx context.Context, st *State, c PendingCall) (bool, string) {
	d := s.hooks.MayCallTool(ctx, hooks.ToolCall{SessionID: st.SessionID, TaskID: st.TaskID, Tenant: st.Tenant,
		CallID: c.CallID, Tool: c.Tool, Arguments: hooks.ArgumentsJSON(c.Args)})
	return !d.Allow, d.Reason
}

// deniedResult answers a call the policy refused, its reason as the result.
func deniedResult(ctx context.Context, b *bus.Batch, sid, callID, reason string) {
	res := &heraldpb.ToolResult{CallId: callID, SessionId: sid, Tool: delegateTool, Content: reason, IsError: true, Status: "denied", Runner: "loop",
		ChildSessionId: childSessionID(sid, callID)}
	b.Proto(ctx, bus.ToolResult(sid, callID), sid+":"+callID, res)
}
