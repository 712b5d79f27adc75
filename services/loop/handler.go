package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/pkg/toolset"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// errBusy redelivers a task for a session whose current turn is not over.
var errBusy = errors.New("session is busy with another task")

// handleTask starts a turn: a new session or the next turn of an existing one.
func (s *Service) handleTask(ctx context.Context, msg jetstream.Msg) error {
	task, err := proto.DecodeTask(msg.Data())
	if err == nil {
		err = bindTask(&task, msg.Subject())
	}
	if err != nil {
		return bus.Permanent(err)
	}
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	id := strconv.FormatUint(meta.Sequence.Stream, 36) + strconv.FormatInt(meta.Timestamp.UnixMilli(), 36)
	// Only a task id its sender chose can have been interrupted already.
	// The check is a read of the control stream, made while the session's
	// state is read; the turn waits for its answer before deciding.
	check := make(chan bool, 1)
	if task.TaskID != "" && task.SessionID != "" {
		go func() { check <- s.interruptedBeforeStart(ctx, task) }()
	} else {
		check <- false
	}
	cancelledOnce := sync.OnceValue(func() bool { return <-check })
	cancelled := false
	if s.needsSlot(task) {
		// a slot is taken only by a task that will run
		cancelled = cancelledOnce()
	}
	if task.SessionID == "" {
		task.SessionID = "s" + id
	}
	if task.TaskID == "" {
		task.TaskID = "t" + id
	}
	// A run cancelled before it started needs no slot: it ends at once
	// (and leaves its place in the queue, if it had one).
	slot := ""
	if cancelled {
		s.leaveQueue(task)
	} else if slot, err = s.admitTurn(ctx, task, meta.Timestamp); err != nil {
		return err
	}
	running := true
	err = s.advance(ctx, task.SessionID, func(t *txn) error {
		err := s.startTurn(ctx, t, task, meta.Timestamp, cancelledOnce)
		running = true // decided again after a conflict: the last decision counts
		if t.noop {
			running = t.st != nil && t.st.active()
		} else if err == nil {
			t.st.SlotTenant = slot
		}
		return err
	})
	if err != nil || !running {
		// a task that did not start (it is retried, and asks again) or
		// that had already started and ended holds no slot
		s.releaseTurn(slot, task.TaskID)
	}
	return err
}

// startTurn starts task's turn; isCancelled says whether an interrupt named
// the task before it started.
func (s *Service) startTurn(ctx context.Context, t *txn, task proto.Task, published time.Time, isCancelled func() bool) error {
	// before the redelivery check: a task naming another's session and its
	// task id is refused, not taken for that task delivered again
	if err := checkBinding(t.st, task); err != nil {
		return bus.Permanent(err)
	}
	if t.st != nil && t.st.TaskID == task.TaskID && t.st.Turn > 0 {
		t.noop = true // a redelivered task that already started
		return nil
	}
	pool, err := s.turnPool(t.st, task)
	if err != nil {
		return bus.Permanent(err)
	}
	if t.st != nil && t.st.active() {
		return errBusy
	}
	cancelled := isCancelled()
	st := t.st
	if st == nil {
		st = &State{SessionID: task.SessionID}
		t.st = st
	}
	st.TaskID = task.TaskID
	st.Tenant = firstNonEmpty(task.Tenant, st.Tenant, s.cfg.Tenant)
	st.BoundTenant = task.BoundTenant
	st.Model = firstNonEmpty(task.Model, st.Model, s.cfg.Model)
	st.Pool = pool
	st.Workspace = firstNonEmpty(task.Workspace, st.Workspace)
	st.ParentSessionID = firstNonEmpty(task.ParentSessionID, st.ParentSessionID)
	st.ParentCallID = firstNonEmpty(task.Metadata[parentCallKey], st.ParentCallID)
	st.APIKeyID, st.ScheduleID = task.APIKeyID, task.ScheduleID
	st.MaxCostUSD = task.MaxCostUSD
	st.ReasoningEffort = task.ReasoningEffort
	st.Yes = task.Yes
	st.Toolsets = task.Toolsets
	st.MaxIterations = s.maxIterations(task)
	st.Turn++
	st.Step, st.Refunds, st.Attempt, st.APICalls, st.CostUSD = 0, 0, 0, 0, 0
	st.Usage = proto.Usage{}
	st.resetTurnCounters()
	st.TurnStartedMs = published.UnixMilli()
	st.Trace, st.TraceParent = telemetry.NewTurn(ctx)
	t.dropUnanswered()
	if st.Title == "" {
		st.Title = sessionTitle(task.Prompt)
	}
	// this turn's recall is asked for while the system prompt is built
	var recall <-chan string
	if !cancelled {
		ch, tenant := make(chan string, 1), st.Tenant
		go func() { ch <- s.fetchRecall(ctx, tenant, task.Prompt) }()
		recall = ch
	}
	if len(t.msgs) == 0 {
		t.afterCommit(func() { s.sessionStarted(st, task) })
		prompt, warnings := s.buildSystemPrompt(ctx, st, task.SystemMessage)
		t.appendMsg(&heraldpb.ChatMessage{Role: "system", Content: prompt})
		for _, w := range warnings {
			t.event(w)
		}
	}
	t.appendMsg(&heraldpb.ChatMessage{Role: "user", Content: task.Prompt})
	if cancelled {
		t.state(proto.StateIdle)
		return s.finish(t, proto.ExitInterrupted, "The user interrupted this turn before it finished.", "")
	}
	st.Recall = <-recall
	t.state(proto.StateIdle)
	return s.requestModel(t, nil, nextStep)
}

func (s *Service) maxIterations(task proto.Task) int {
	n := task.MaxIterations
	if n <= 0 {
		n = s.cfg.MaxIterations
	}
	if task.ParentSessionID != "" && n > s.cfg.ChildMaxIterations {
		n = s.cfg.ChildMaxIterations
	}
	return n
}

// requestKind says whether a model request spends an iteration.
type requestKind int

const (
	nextStep  requestKind = iota // a new iteration
	retry                        // the same iteration again (empty, truncated)
	graceCall                    // the summary call after the budget is spent
)

// requestModel asks the gateway for the next response. scaffold messages go
// to the model with this request only; a grace call has no tools. A history
// over the compression threshold is compressed first.
func (s *Service) requestModel(t *txn, scaffold []scaffoldMsg, kind requestKind) error {
	if kind != retry && s.needsCompression(t, s.wireToolsFor(t.st, kind == graceCall)) {
		return s.requestCompression(t, scaffold, kind, reasonPreflight)
	}
	return s.sendModelRequest(t, scaffold, kind)
}

// sendModelRequest publishes the model request of the next step or attempt.
func (s *Service) sendModelRequest(t *txn, scaffold []scaffoldMsg, kind requestKind) error {
	st := t.st
	grace := kind == graceCall
	if kind == nextStep {
		st.Step++
		st.Attempt = 0
		st.OverflowCompressions = 0
	} else {
		st.Attempt++
	}
	reqID := fmt.Sprintf("%s:%d:%d:%d", st.SessionID, st.Turn, st.Step, st.Attempt)
	st.Status = statusThinking
	st.Pending = &Pending{Kind: waitLLM, RequestID: reqID, Scaffold: scaffold, Grace: grace}
	req, tools := s.llmRequest(t, reqID, scaffold, grace)
	call := llmCallOf(st, t.history())
	t.effect(func(ctx context.Context, b *bus.Batch) {
		out := s.withHookContext(ctx, call, req)
		// split off the transcript as sent (after any hook edited it) and
		// refer to it; st is committed after this runs
		out.History, out.Messages = t.transcriptRef(sameValues(out.Messages, req.Messages))
		s.referToTools(ctx, out, tools)
		b.Proto(ctx, bus.LLMRequest(st.SessionID), reqID, out)
	})
	t.state(proto.StateThinking)
	return nil
}

func (s *Service) llmRequest(t *txn, reqID string, scaffold []scaffoldMsg, grace bool) (*heraldpb.LLMRequest, *wiredTools) {
	st := t.st
	msgs := withRecall(RepairHistory(t.history()), st.Recall)
	for _, m := range scaffold {
		msgs = append(msgs, &heraldpb.ChatMessage{Role: m.Role, Content: m.Content, Scaffolding: true})
	}
	msgs = mergeAdjacentUsers(msgs)
	purpose := "agent"
	if st.ParentSessionID != "" {
		purpose = "subagent"
	}
	req := &heraldpb.LLMRequest{
		RequestId: reqID, SessionId: st.SessionID, TaskId: st.TaskID, Tenant: st.Tenant,
		Purpose: purpose, Step: int32(st.Step), Turn: int32(st.Turn), Model: st.Model,
		Messages: msgs, Stream: true, ReplySubject: bus.LLMResponse(bus.OwnerLoop, st.SessionID),
		MaxCostUsd: st.MaxCostUSD, SpentUsd: st.CostUSD, ParentSessionId: st.ParentSessionID,
		PreferFallback: st.PreferFallback, BoundTenant: st.BoundTenant, ApiKeyId: st.APIKeyID, ScheduleId: st.ScheduleID,
	}
	if st.ReasoningEffort != "" {
		req.Reasoning = &heraldpb.Reasoning{Effort: st.ReasoningEffort}
	}
	if grace {
		return req, nil
	}
	tools := s.wired(s.toolsFor(st))
	req.Tools = tools.specs
	return req, tools
}

// wiredTools is a tool list in its wire form, with its tool-set encoding
// and digest (pkg/toolset).
type wiredTools struct {
	specs  []*heraldpb.ToolSpec
	data   []byte
	digest string
}

// wireTools converts specs to their wire form once per distinct tool list:
// the list is the same on every step of a session, and re-encoding every
// schema on every step showed up in profiles.
func (s *Service) wireTools(specs []toolspec.Spec) []*heraldpb.ToolSpec {
	return s.wired(specs).specs
}

func (s *Service) wired(specs []toolspec.Spec) *wiredTools {
	var key strings.Builder
	for _, spec := range specs {
		key.WriteString(spec.Name)
		key.WriteByte(',')
	}
	if cached, ok := s.toolCache.Load(key.String()); ok {
		return cached.(*wiredTools)
	}
	w := &wiredTools{specs: make([]*heraldpb.ToolSpec, len(specs))}
	for i, spec := range specs {
		w.specs[i] = &heraldpb.ToolSpec{Name: spec.Name, Description: spec.Description, ParametersJson: spec.ParametersJSON()}
	}
	w.data, w.digest, _ = toolset.Encode(w.specs) // a list that cannot be encoded travels whole
	s.toolCache.Store(key.String(), w)
	return w
}

// referToTools replaces req's tool list by the digest of the stored set
// (pkg/toolset). Where the set cannot be stored (a bucket this server lacks,
// a user without the right to it) the list travels in the request, as it
// did before, and the loop says so once.
func (s *Service) referToTools(ctx context.Context, req *heraldpb.LLMRequest, w *wiredTools) {
	if w == nil || w.digest == "" || len(req.GetTools()) == 0 {
		return
	}
	if err := s.toolSets.Refer(ctx, w.data, w.digest); err != nil {
		s.inlineTools.Do(func() {
			s.log.Warn().Err(err).Msg("tool definitions travel in every model request: the tool-set bucket is not usable (run herald declare)")
		})
		return
	}
	req.ToolsDigest, req.Tools = w.digest, nil
}

// childBlockedTools are tools a delegated child may not use.
var childBlockedTools = map[string]bool{"delegate_task": true, "clarify": true, "memory": true, "execute_code": true}

// toolList is the tools offered to sessions of one kind: their specs and
// names, shared by every caller (read only).
type toolList struct {
	specs []toolspec.Spec
	names []string
}

// toolListKey is what the tools a session is offered depend on.
type toolListKey struct {
	toolsets string
	child    bool
	remote   uint64 // the generation of the runners' announced tools
}

// maxToolLists bounds the cache of tool lists; a task chooses its toolsets.
const maxToolLists = 256

// toolsFor lists the tools offered to a session, filtered by its toolsets.
func (s *Service) toolsFor(st *State) []toolspec.Spec { return s.toolList(st).specs }

// toolList is toolsFor with the names, built once per kind of session.
func (s *Service) toolList(st *State) *toolList {
	var extra []toolspec.Spec
	key := toolListKey{toolsets: strings.Join(st.Toolsets, "\x00"), child: st.ParentSessionID != ""}
	if s.remote != nil {
		extra, key.remote = s.remote.current()
	}
	s.toolListsMu.Lock()
	l, ok := s.toolLists[key]
	s.toolListsMu.Unlock()
	if ok {
		return l
	}
	l = &toolList{specs: s.listTools(st, extra)}
	for _, spec := range l.specs {
		l.names = append(l.names, spec.Name)
	}
	s.toolListsMu.Lock()
	if s.toolLists == nil || len(s.toolLists) >= maxToolLists {
		s.toolLists = map[toolListKey]*toolList{}
	}
	s.toolLists[key] = l
	s.toolListsMu.Unlock()
	return l
}

// listTools lists the built-in and extra tools offered to st's kind of
// session, filtered by its toolsets.
func (s *Service) listTools(st *State, extra []toolspec.Spec) []toolspec.Spec {
	var out []toolspec.Spec
	allowed := map[string]bool{}
	for _, n := range st.Toolsets {
		allowed[n] = true
	}
	all := toolspec.All()
	if len(extra) > 0 {
		all = append(all, extra...)
		sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	}
	for _, spec := range all {
		if st.ParentSessionID != "" && childBlockedTools[spec.Name] {
			continue
		}
		if len(allowed) > 0 && !allowed[spec.Name] {
			continue
		}
		out = append(out, spec)
	}
	return out
}

func (s *Service) toolNames(st *State) []string { return s.toolList(st).names }

// handleModelResponse advances a session with the gateway's answer.
func (s *Service) handleModelResponse(ctx context.Context, msg jetstream.Msg) error {
	resp := &heraldpb.LLMResponse{}
	if err := bus.Decode(msg.Data(), resp); err != nil {
		return err
	}
	if !proto.IsToken(resp.SessionId) {
		return bus.Permanent(fmt.Errorf("response has no valid session_id (got %q)", resp.SessionId))
	}
	received := resp
	return s.advance(ctx, received.SessionId, func(t *txn) error {
		// A decision may be taken again (a lost race, a stale guess, see
		// advanceOnce) and it edits the message it is given, so each gets
		// its own copy.
		resp := gproto.Clone(received).(*heraldpb.LLMResponse)
		st := t.st
		if st == nil || st.Pending == nil || st.Pending.Kind != waitLLM || st.Pending.RequestID != resp.RequestId {
			t.noop = true // stale (the session moved on) unless early
			return classifyResponse(st, resp.RequestId)
		}
		st.account(resp)
		return s.onModelAnswer(t, resp)
	})
}

func (st *State) account(resp *heraldpb.LLMResponse) {
	attempts := int(resp.Attempts)
	if attempts < 1 {
		attempts = 1
	}
	st.APICalls += attempts
	if u := resp.Usage; u != nil {
		st.Usage.InputTokens += u.InputTokens
		st.Usage.OutputTokens += u.OutputTokens
		st.Usage.CacheReadTokens += u.CacheReadTokens
		st.Usage.CacheWriteTokens += u.CacheWriteTokens
		st.Usage.ReasoningTokens += u.ReasoningTokens
	}
	st.CostUSD += resp.CostUsd
	st.SessionCostUSD += resp.CostUsd
	st.addPricing(resp.Pricing, attempts)
	if resp.PromptTokens > 0 {
		st.PromptTokens = resp.PromptTokens
	}
}

// handleToolResult records one finished call and advances when the step's
// calls (or the current segment) are complete.
func (s *Service) handleToolResult(ctx context.Context, msg jetstream.Msg) error {
	res := &heraldpb.ToolResult{}
	if err := bus.Decode(msg.Data(), res); err != nil {
		return err
	}
	if !proto.IsToken(res.SessionId) {
		return bus.Permanent(fmt.Errorf("tool result has no valid session_id (got %q)", res.SessionId))
	}
	s.answered(res.SessionId, res.CallId)
	return s.advance(ctx, res.SessionId, func(t *txn) error {
		st := t.st
		if st == nil {
			// Tool calls are only dispatched by a transition of a session
			// whose state exists, so this result answers nothing of ours.
			t.noop = true
			return nil
		}
		i := -1
		if st.Pending != nil && st.Pending.Kind == waitTools {
			i = st.Pending.callIndex(res.CallId)
		}
		if i < 0 {
			t.noop = true
			return classifyResult(st, res.CallId)
		}
		if st.Pending.Calls[i].Done {
			t.noop = true
			return nil
		}
		if err := checkChildAnswer(st.SessionID, st.Pending.Calls[i], res); err != nil {
			t.noop = true
			return bus.Permanent(err)
		}
		if st.Pending.Calls[i].Tool == delegateTool {
			meta, err := msg.Metadata()
			if err != nil {
				return err
			}
			st.Pending.Calls[i].ResultSeq = meta.Sequence.Stream
		}
		st.Pending.Calls[i].Done = true
		t.inHand = res
		return s.onToolsProgress(ctx, t)
	})
}

func (p *Pending) callIndex(callID string) int {
	for i, c := range p.Calls {
		if c.CallID == callID {
			return i
		}
	}
	return -1
}

// handleInterrupt ends the session's current turn.
func (s *Service) handleInterrupt(ctx context.Context, msg jetstream.Msg) error {
	sid, tenant, ok := bus.InterruptedSession(msg.Subject())
	if !ok {
		return bus.Permanent(fmt.Errorf("interrupt on unexpected subject %q", msg.Subject()))
	}
	meta, err := msg.Metadata()
	if err != nil {
		return err
	}
	var in proto.Interrupt
	_ = json.Unmarshal(msg.Data(), &in) // any other body stops the current turn, as it always did
	return s.advance(ctx, sid, func(t *txn) error {
		if in.TaskID != "" && (t.st == nil || t.st.TaskID != in.TaskID) {
			return s.notStarted(t, meta.NumDelivered)
		}
		if tenant != "" && (t.st == nil || t.st.BoundTenant != tenant) {
			return bus.Permanent(fmt.Errorf("interrupt from tenant %q for session %s, which is not bound to it", tenant, sid))
		}
		if in.TaskID != "" && !t.st.active() {
			t.noop = true // that task's turn already ended
			return nil
		}
		if in.TaskID != "" {
			return s.finish(t, proto.ExitInterrupted, "The user interrupted this turn before it finished.", "")
		}
		if t.st == nil || !t.st.active() || meta.Timestamp.UnixMilli() < t.st.TurnStartedMs {
			t.noop = true
			return nil
		}
		return s.finish(t, proto.ExitInterrupted, "The user interrupted this turn before it finished.", "")
	})
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
