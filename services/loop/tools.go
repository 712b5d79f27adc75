package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// dispatchTools records the model's tool calls and starts their first segment.
func (s *Service) dispatchTools(t *txn, m *heraldpb.ChatMessage) error {
	st := t.st
	known := s.toolNames(st)
	m.ToolCalls = uniqueCalls(m.ToolCalls)
	calls := make([]PendingCall, len(m.ToolCalls))
	invalid := 0
	for i, tc := range m.ToolCalls {
		if tc.Id == "" {
			tc.Id = fmt.Sprintf("call_%d_%d", st.Step, i)
		}
		c := PendingCall{CallID: fmt.Sprintf("t%ds%dc%d", st.Turn, st.Step, i), ModelID: tc.Id, Tool: tc.Name}
		if reason := s.prepareCall(&c, tc, known, st); reason != "" {
			c.Local, c.Done, c.Result = true, true, reason
			invalid++
		}
		calls[i] = c
	}
	t.appendMsg(&heraldpb.ChatMessage{Role: "assistant", Content: m.Content, Reasoning: m.Reasoning, ReasoningItems: m.ReasoningItems, ToolCalls: asRecorded(m.ToolCalls, calls)})
	if invalid == len(calls) {
		st.InvalidStrikes++
		if st.InvalidStrikes >= maxInvalidStrikes {
			return s.finish(t, proto.ExitInvalidToolCalls, "",
				fmt.Sprintf("the model made invalid tool calls %d times in a row; last: %s", st.InvalidStrikes, calls[0].Result))
		}
	} else {
		st.InvalidStrikes = 0
	}
	segs := SegmentPlan(calls, func(c PendingCall) bool { return c.Local || c.Tool == "clarify" }, s.cfg.MaxConcurrentChildren)
	for i := range calls {
		calls[i].Segment = segs[i]
	}
	st.Status = statusActing
	st.Pending = &Pending{Kind: waitTools, Calls: calls}
	t.state(proto.StateActing)
	return s.runSegment(t)
}

// uniqueCalls drops calls of one step that repeat an earlier call's name
// and arguments with nothing but read-only calls between them: the model
// asked for one thing twice (some providers' streams duplicate a call), and
// running it twice (an append, a deploy) would do it twice. A repeat after a
// call that may change things (read, write, read again) is kept. The
// history keeps the calls that run.
func uniqueCalls(calls []*heraldpb.ToolCall) []*heraldpb.ToolCall {
	seen := map[string]bool{}
	out := calls[:0:0]
	for _, tc := range calls {
		key := tc.Name + "\x00" + CanonicalArgs(tc.Arguments)
		if seen[key] {
			continue
		}
		if spec, ok := toolspec.Lookup(tc.Name); !ok || !spec.ReadOnly {
			clear(seen) // what ran before may change what a repeat finds
		}
		seen[key] = true
		out = append(out, tc)
	}
	return out
}

// prepareCall repairs the call's name and arguments; it returns why the call
// cannot run, as the result the model will see, or "".
func (s *Service) prepareCall(c *PendingCall, tc *heraldpb.ToolCall, known []string, st *State) string {
	name, ok := RepairToolName(tc.Name, known)
	if !ok {
		return fmt.Sprintf("Error: there is no tool named %q. Available tools: %s.", tc.Name, strings.Join(known, ", "))
	}
	c.Tool = name
	args, err := RepairArgs(tc.Arguments)
	var ae *ArgsError
	if errors.As(err, &ae) && ae.CutOff {
		return fmt.Sprintf("Error: the arguments of this %s call were cut off: %v. Nothing was done. "+
			"Send the call again with complete arguments; if the content is long, split it over several smaller calls.", name, err)
	}
	if err != nil {
		spec, _ := toolspec.Lookup(name)
		return fmt.Sprintf("Error: the arguments for %s could not be used: %v. Send a JSON object matching this schema: %s", name, err, spec.ParametersJSON())
	}
	c.Args = args
	return ""
}

// asRecorded is the model's calls as the history keeps them: under the
// repaired tool name, with arguments every provider accepts (the repaired
// object, or {} when the arguments were unusable; the call's result says
// why). A name that matched no tool is kept as the model wrote it, so the
// result naming it makes sense, unless providers would refuse it.
func asRecorded(model []*heraldpb.ToolCall, calls []PendingCall) []*heraldpb.ToolCall {
	out := make([]*heraldpb.ToolCall, len(model))
	for i, tc := range model {
		out[i] = &heraldpb.ToolCall{Id: tc.Id, Name: WireToolName(calls[i].Tool), Arguments: calls[i].Args}
		if out[i].Arguments == "" {
			out[i].Arguments = WireArgs(tc.Arguments)
		}
	}
	return out
}

// runSegment dispatches the calls of the current segment, skipping past
// segments the loop already answered itself.
func (s *Service) runSegment(t *txn) error {
	p := t.st.Pending
	for {
		if !p.segmentDone(p.Segment) {
			for _, c := range p.Calls {
				if c.Segment == p.Segment && !c.Done {
					s.dispatchCall(t, c)
				}
			}
			return nil
		}
		if !p.hasSegment(p.Segment + 1) {
			return s.completeStep(t)
		}
		p.Segment++
	}
}

func (p *Pending) segmentDone(seg int) bool {
	for _, c := range p.Calls {
		if c.Segment == seg && !c.Done {
			return false
		}
	}
	return true
}

func (p *Pending) hasSegment(seg int) bool {
	for _, c := range p.Calls {
		if c.Segment == seg {
			return true
		}
	}
	return false
}

// dispatchCall publishes one call to the service that runs its tool.
func (s *Service) dispatchCall(t *txn, c PendingCall) {
	st := t.st
	if c.Tool == delegateTool {
		s.dispatchChild(t, c)
		return
	}
	req := &heraldpb.ToolCallRequest{
		CallId: c.CallID, SessionId: st.SessionID, TaskId: st.TaskID, Tenant: st.Tenant, Step: int32(st.Step),
		Tool: c.Tool, Arguments: c.Args, Workspace: st.toolWorkspace(), Pool: st.Pool, Approved: st.Yes,
	}
	subject := bus.ToolCall(st.Pool, st.SessionID)
	if spec, _ := toolspec.Lookup(c.Tool); spec.Service == "memory" {
		subject = bus.MemoryCall(st.SessionID)
	} else if toolspec.Quick(c.Tool) {
		subject = bus.ToolRead(st.Pool, st.SessionID)
	}
	t.effect(func(ctx context.Context, b *bus.Batch) {
		b.Proto(ctx, subject, st.SessionID+":"+c.CallID, req)
	})
	if subject != bus.MemoryCall(st.SessionID) {
		pool, ev := st.Pool, proto.Event{SessionID: st.SessionID, TaskID: st.TaskID, CallID: c.CallID, Tool: c.Tool,
			Step: st.Step, BoundTenant: st.BoundTenant}
		t.afterCommit(func() { s.watchPool(pool, subject, ev) })
	}
}

// onToolsProgress moves to the next segment or completes the step.
func (s *Service) onToolsProgress(ctx context.Context, t *txn) error {
	p := t.st.Pending
	if !p.segmentDone(p.Segment) {
		return nil
	}
	if p.hasSegment(p.Segment + 1) {
		p.Segment++
		return s.runSegment(t)
	}
	return s.completeStep(t)
}

// completeStep appends every result in call order and asks for the next step.
func (s *Service) completeStep(t *txn) error {
	st := t.st
	ctx := context.Background()
	var fp []string
	for _, c := range st.Pending.Calls {
		content := c.Result
		if !c.Local {
			res, err := t.resultOf(ctx, c)
			if err != nil {
				return err
			}
			content = frameUntrusted(c.Tool, res.Content)
			s.addChildCost(st, c, res)
		}
		t.appendMsg(&heraldpb.ChatMessage{Role: "tool", ToolCallId: c.ModelID, Name: WireToolName(c.Tool), Content: content})
		fp = append(fp, c.Tool+" "+CanonicalArgs(c.Args)+" "+digest(content))
	}
	st.Status = statusThinking
	t.state(proto.StateObserving)
	if done := s.trackRepeats(t, fp); done {
		return nil
	}
	st.refundCheapStep()
	if st.MaxCostUSD > 0 && st.CostUSD >= st.MaxCostUSD {
		return s.finish(t, proto.ExitBudgetExhausted, moneySpent(st, t.history()), "")
	}
	if st.budgetSpent() {
		st.GraceReason = proto.ExitMaxIterations
		return s.requestModel(t, []scaffoldMsg{{Role: "user", Content: graceMaxIter}}, graceCall)
	}
	var scaffold []scaffoldMsg
	if st.RepeatCount == s.cfg.RepeatThreshold-1 {
		scaffold = append(scaffold, scaffoldMsg{Role: "user", Content: nudgeRepeat})
	}
	if st.MaxIterations > 1 && st.MaxIterations-(st.Step-st.Refunds) == 1 {
		scaffold = append(scaffold, scaffoldMsg{Role: "user", Content: warnLastStep})
	}
	return s.requestModel(t, scaffold, nextStep)
}

// trackRepeats ends the turn when the same calls gave the same results
// RepeatThreshold rounds in a row.
func (s *Service) trackRepeats(t *txn, fp []string) bool {
	st := t.st
	sort.Strings(fp)
	f := digest(strings.Join(fp, "\n"))
	if f == st.LastFingerprint {
		st.RepeatCount++
	} else {
		st.LastFingerprint, st.RepeatCount = f, 1
	}
	if st.RepeatCount < s.cfg.RepeatThreshold {
		return false
	}
	found := lastAssistantText(t.history())
	final := fmt.Sprintf("Stopped: the same tool call returned the same result %d times in a row, so repeating it would not help.", st.RepeatCount)
	if found != "" {
		final += " What was found so far: " + found
	}
	_ = s.finish(t, proto.ExitRepeatDetected, final, "")
	return true
}

func lastAssistantText(msgs []*heraldpb.ChatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" && strings.TrimSpace(msgs[i].Content) != "" {
			return msgs[i].Content
		}
	}
	return ""
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// loadResult reads a call's stored result.
func (s *Service) loadResult(ctx context.Context, sid, callID string) (*heraldpb.ToolResult, error) {
	raw, err := bus.LastOnSubject(ctx, s.deps.JS, bus.StreamToolResults, bus.ToolResult(sid, callID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("result of call %s of session %s is missing", callID, sid)
	}
	if err != nil {
		return nil, err
	}
	res := &heraldpb.ToolResult{}
	if err := gproto.Unmarshal(raw.Data, res); err != nil {
		return nil, fmt.Errorf("result of call %s: %w", callID, err)
	}
	return res, nil
}

// resultOf is a call's stored result; a delegate_task call's is the very
// answer it accepted, read at its sequence and checked again.
func (t *txn) resultOf(ctx context.Context, c PendingCall) (*heraldpb.ToolResult, error) {
	if c.ResultSeq == 0 || (t.inHand != nil && t.inHand.CallId == c.CallID) {
		return t.result(ctx, c.CallID)
	}
	raw, err := bus.NextOnSubject(ctx, t.s.deps.JS, bus.StreamToolResults, bus.ToolResult(t.st.SessionID, c.CallID), c.ResultSeq)
	if err != nil {
		return nil, fmt.Errorf("result of call %s of session %s: %w", c.CallID, t.st.SessionID, err)
	}
	res := &heraldpb.ToolResult{}
	if err := gproto.Unmarshal(raw.Data, res); err != nil {
		return nil, fmt.Errorf("result of call %s: %w", c.CallID, err)
	}
	return res, checkChildAnswer(t.st.SessionID, c, res)
}

// result is a call's stored result: the one in hand, else from the stream.
func (t *txn) result(ctx context.Context, callID string) (*heraldpb.ToolResult, error) {
	if t.inHand != nil && t.inHand.CallId == callID {
		return t.inHand, nil
	}
	return t.s.loadResult(ctx, t.st.SessionID, callID)
}
