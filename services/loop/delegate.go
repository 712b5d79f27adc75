package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

const delegateTool = "delegate_task"

func init() {
	toolspec.Register(toolspec.Spec{Name: delegateTool, Service: "loop",
		Description: "Hand a self-contained goal to a subagent with its own step budget; it works in the same workspace and reports back. Several delegate_task calls in one reply run in parallel (at most 3 at once).",
		Parameters: map[string]any{"type": "object", "required": []string{"goal"}, "additionalProperties": false,
			"properties": map[string]any{
				"goal":     map[string]any{"type": "string", "description": "What the subagent must achieve."},
				"context":  map[string]any{"type": "string", "description": "Everything it needs to know: it cannot see this conversation."},
				"toolsets": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Tool names it may use (default: all it is allowed)."},
			}}})
}

type delegateArgs struct {
	Goal     string   `json:"goal"`
	Context  string   `json:"context"`
	Toolsets []string `json:"toolsets"`
}

// childSessionID is deterministic so a redelivered dispatch starts one child.
func childSessionID(parent, callID string) string { return bus.Token(parent + "-" + callID) }

// dispatchChild starts a child session for a delegate_task call. Its result
// comes back as the call's tool result (see answerParent).
func (s *Service) dispatchChild(t *txn, c PendingCall) {
	st := t.st
	var a delegateArgs
	_ = json.Unmarshal([]byte(c.Args), &a)
	prompt := strings.TrimSpace(a.Goal)
	if a.Context != "" {
		prompt += "\n\nContext from the parent agent:\n" + a.Context
	}
	task := proto.Task{
		Prompt: prompt, SessionID: childSessionID(st.SessionID, c.CallID), TaskID: st.TaskID + "-" + c.CallID,
		Model: st.Model, Tenant: st.Tenant, Toolsets: a.Toolsets, Workspace: st.Workspace, Pool: st.Pool,
		MaxIterations: s.cfg.ChildMaxIterations, ParentSessionID: st.SessionID, Yes: st.Yes, ReasoningEffort: st.ReasoningEffort,
		APIKeyID: st.APIKeyID, ScheduleID: st.ScheduleID,
		Metadata: map[string]string{parentCallKey: c.CallID},
	}
	if strings.TrimSpace(a.Goal) == "" {
		task.Prompt = ""
	}
	t.effect(func(ctx context.Context, b *bus.Batch) {
		if task.Prompt == "" {
			localResult(ctx, b, st.SessionID, c.CallID, "Error: delegate_task needs a non-empty \"goal\".")
			return
		}
		if refused, why := s.policyRefusesChild(ctx, st, c); refused {
			deniedResult(ctx, b, st.SessionID, c.CallID, why)
			return
		}
		b.JSON(ctx, st.subtaskSubject(), "child:"+task.SessionID, task)
	})
}

// localResult answers a call on the loop's behalf through the results stream.
func localResult(ctx context.Context, b *bus.Batch, sid, callID, content string) {
	res := &heraldpb.ToolResult{CallId: callID, SessionId: sid, Content: content, IsError: true, Status: "error", Runner: "loop",
		ChildSessionId: childSessionID(sid, callID)}
	b.Proto(ctx, bus.ToolResult(sid, callID), sid+":"+callID, res)
}

// checkChildAnswer refuses an answer to a pending delegate_task call that
// does not come from exactly the child the call spawned (the loop answers
// such calls itself, never a tool runner): a forged answer must not become
// the call's result.
func checkChildAnswer(parent string, c PendingCall, res *heraldpb.ToolResult) error {
	if c.Tool != delegateTool {
		return nil
	}
	want := childSessionID(parent, c.CallID)
	if res.GetRunner() != "loop" || res.GetChildSessionId() != want || res.GetSessionId() != parent || res.GetCallId() != c.CallID {
		return fmt.Errorf("answer to delegate_task call %s of session %s refused: it names child session %q (runner %q), but the call spawned %s",
			c.CallID, parent, res.GetChildSessionId(), res.GetRunner(), want)
	}
	return nil
}

// addChildCost adds a finished child's spending to the parent's turn.
func (s *Service) addChildCost(st *State, c PendingCall, res *heraldpb.ToolResult) {
	if c.Tool != delegateTool {
		return
	}
	st.CostUSD += res.CostUsd
	st.SessionCostUSD += res.CostUsd
	st.addPricing(res.Pricing, int(res.ApiCalls))
	st.APICalls += int(res.ApiCalls)
	if u := res.Usage; u != nil {
		st.Usage.InputTokens += u.InputTokens
		st.Usage.OutputTokens += u.OutputTokens
		st.Usage.CacheReadTokens += u.CacheReadTokens
		st.Usage.CacheWriteTokens += u.CacheWriteTokens
		st.Usage.ReasoningTokens += u.ReasoningTokens
	}
}
