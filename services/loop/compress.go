package loop

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/models"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// Compression reasons, as the compressor knows them.
const (
	reasonPreflight = "preflight"
	reasonOverflow  = "overflow"
)

// Compression limits of BEHAVIOURS.md.
const (
	maxOverflowCompressions = 3    // per model call
	weakSaving              = 0.10 // a compression saving less is weak
	maxWeakCompressions     = 2    // weak compressions in a row before giving up
	escalateSaving          = 0.25 // after a compression saving less, the next one summarises
)

// Wire framing a history costs beyond its text, in characters: role keys,
// ids and JSON punctuation. Pruned histories are mostly framing, so leaving
// it out lets a "small" history overflow the window.
const (
	messageFraming  = 48
	toolCallFraming = 100
	toolSpecFraming = 64
)

// historyChars is the estimated wire size of msgs in characters.
func historyChars(msgs []*heraldpb.ChatMessage) int {
	chars := 0
	for _, m := range msgs {
		chars += len(m.Content) + len(m.Reasoning) + len(m.Name) + len(m.ToolCallId) + messageFraming
		for _, it := range m.ReasoningItems { // sent back with the message: signatures, encrypted reasoning
			chars += len(it.Json)
		}
		for _, c := range m.ToolCalls {
			chars += len(c.Id) + len(c.Name) + len(c.Arguments) + toolCallFraming
		}
	}
	return chars
}

func toolsChars(tools []*heraldpb.ToolSpec) int {
	chars := 0
	for _, ts := range tools {
		chars += len(ts.Name) + len(ts.Description) + len(ts.ParametersJson) + toolSpecFraming
	}
	return chars
}

// promptTokens estimates what the next request will cost in prompt tokens:
// the provider's last report or the chars/4 estimate of the history and
// tools, whichever is larger (the report lags one step behind).
func (s *Service) promptTokens(t *txn, tools []*heraldpb.ToolSpec) int64 {
	est := models.EstimateTokens(historyChars(t.msgs) + historyChars(t.appended) + toolsChars(tools))
	return max(est, t.st.PromptTokens)
}

// needsCompression reports whether the next request would exceed the
// compression threshold of the model's context window.
func (s *Service) needsCompression(t *txn, tools []*heraldpb.ToolSpec) bool {
	c := s.cfg.Compression
	if !c.Enabled || t.st.NoCompress {
		return false
	}
	limit := int64(c.Threshold * float64(s.contextWindow(t.st.Model)))
	return s.promptTokens(t, tools) > limit
}

// requestCompression asks the compressor to shrink the history; the model
// request (resume, with its scaffolding) is sent once the result is in.
func (s *Service) requestCompression(t *txn, scaffold []scaffoldMsg, resume requestKind, reason string) error {
	st := t.st
	if reason == reasonPreflight && st.Compressions > 0 && st.LastSaving < escalateSaving {
		// Pruning is running dry (what is left is mostly many small
		// messages): have the middle summarised instead.
		reason = reasonOverflow
	}
	st.CompressAttempts++
	reqID := st.SessionID + ":c" + strconv.Itoa(st.CompressAttempts)
	c := s.cfg.Compression
	msgs := RepairHistory(t.history())
	req := &heraldpb.CompressRequest{
		RequestId: reqID, SessionId: st.SessionID, TaskId: st.TaskID, Tenant: st.Tenant,
		Messages: msgs, ProtectFirstN: int32(c.ProtectFirstN), ProtectLastN: int32(c.ProtectLastN),
		ContextWindow: s.compressWindow(st, msgs), TargetRatio: c.TargetRatio,
		ReplySubject: bus.CompressResult(st.SessionID), Reason: reason, Model: st.Model,
		ApiKeyId: st.APIKeyID, ScheduleId: st.ScheduleID,
	}
	st.Status = statusCompressing
	st.Pending = &Pending{Kind: waitCompress, RequestID: reqID, Scaffold: scaffold, Resume: int(resume),
		Grace: resume == graceCall, Reason: reason}
	t.effect(func(ctx context.Context, b *bus.Batch) {
		b.Proto(ctx, bus.CompressRequest(st.SessionID), reqID, req)
	})
	t.event(proto.Event{Type: proto.EventCompression, Status: "started", RequestID: reqID,
		Message: "compressing the conversation history (" + reason + ")"})
	return nil
}

// handleCompressResult continues a session whose history was compressed:
// the compressed history goes on under a new log whose parent is the old
// one, and the model request that waited is sent.
func (s *Service) handleCompressResult(ctx context.Context, msg jetstream.Msg) error {
	res := &heraldpb.CompressResult{}
	if err := bus.Decode(msg.Data(), res); err != nil {
		return err
	}
	if !proto.IsToken(res.SessionId) {
		return bus.Permanent(fmt.Errorf("compression result has no valid session_id (got %q)", res.SessionId))
	}
	return s.advance(ctx, res.SessionId, func(t *txn) error {
		st := t.st
		if st == nil || st.Pending == nil || st.Pending.Kind != waitCompress || st.Pending.RequestID != res.RequestId {
			t.noop = true
			return classifyCompress(st, res.RequestId)
		}
		return s.onCompressed(t, res)
	})
}

func (s *Service) onCompressed(t *txn, res *heraldpb.CompressResult) error {
	st := t.st
	p := st.Pending
	// Only this transition consumes the result (a redelivery finds the
	// session moved on), so the summary call is counted once.
	st.accountSummary(res)
	if res.Error != "" || len(res.Messages) == 0 {
		st.NoCompress = true
		t.event(proto.Event{Type: proto.EventCompression, Status: "failed", RequestID: res.RequestId,
			Message: "compression failed, continuing without it: " + res.Error})
		return s.afterCompression(t, p)
	}
	st.Compressions++
	saved := 0.0
	if res.TokensBefore > 0 {
		saved = 1 - float64(res.TokensAfter)/float64(res.TokensBefore)
	}
	st.LastSaving = saved
	if saved < weakSaving {
		st.WeakCompressions++
	} else {
		st.WeakCompressions = 0
	}
	t.restartLog(fmt.Sprintf("%s-c%d", st.SessionID, st.Compressions), res.Messages)
	st.PromptTokens = 0
	t.event(proto.Event{Type: proto.EventCompression, Status: "done", RequestID: res.RequestId, Tokens: res.TokensAfter,
		Message: fmt.Sprintf("history compressed from %d to %d tokens; the session continues as %s", res.TokensBefore, res.TokensAfter, st.LogSID)})
	if st.WeakCompressions >= maxWeakCompressions {
		st.NoCompress = true
		t.event(proto.Event{Type: proto.EventCompression, Status: "stopped",
			Message: "compression no longer saves enough (two in a row under 10%); start a new session to continue comfortably"})
	}
	return s.afterCompression(t, p)
}

// afterCompression sends the model request that waited for the compression,
// unless the summary call used up the turn's money budget.
func (s *Service) afterCompression(t *txn, p *Pending) error {
	st := t.st
	if st.MaxCostUSD > 0 && st.CostUSD >= st.MaxCostUSD {
		return s.finish(t, proto.ExitBudgetExhausted, moneySpent(st, t.history()), "")
	}
	if p.Reason != reasonOverflow && s.needsCompression(t, s.wireToolsFor(st, p.Grace)) {
		// Pruning alone left a history that is still too big on the wire
		// (many small messages): summarise the middle this time.
		return s.requestCompression(t, p.Scaffold, requestKind(p.Resume), reasonOverflow)
	}
	return s.sendModelRequest(t, p.Scaffold, requestKind(p.Resume))
}

// accountSummary adds what a compression's summary call spent to the turn
// and the session, like any model call of the turn.
func (st *State) accountSummary(res *heraldpb.CompressResult) {
	st.APICalls += int(res.SummaryApiCalls)
	st.CostUSD += res.SummaryCostUsd
	st.SessionCostUSD += res.SummaryCostUsd
	st.addPricing(res.SummaryPricing, int(res.SummaryApiCalls))
	if u := res.SummaryUsage; u != nil {
		st.Usage.InputTokens += u.InputTokens
		st.Usage.OutputTokens += u.OutputTokens
		st.Usage.CacheReadTokens += u.CacheReadTokens
		st.Usage.CacheWriteTokens += u.CacheWriteTokens
		st.Usage.ReasoningTokens += u.ReasoningTokens
	}
}

// classifyCompress tells an early compression result from a stale one.
func classifyCompress(st *State, requestID string) error {
	i := strings.LastIndex(requestID, ":c")
	if i < 0 {
		return nil
	}
	n, err := strconv.Atoi(requestID[i+2:])
	if err != nil {
		return nil
	}
	if st == nil || n > st.CompressAttempts {
		return errEarly
	}
	return nil
}

// onOverflow compresses after the provider refused the prompt as too long.
func (s *Service) onOverflow(t *txn) (bool, error) {
	st := t.st
	if !s.cfg.Compression.Enabled || st.NoCompress || st.OverflowCompressions >= maxOverflowCompressions {
		return false, nil
	}
	st.OverflowCompressions++
	return true, s.requestCompression(t, st.Pending.Scaffold, retry, reasonOverflow)
}

// compressWindow is the window the compressor should fit msgs' text into:
// the model's, less what the tool schemas and the wire framing of msgs take,
// which the compressor does not count. Without this the compressor's idea
// of "fits" sits just under the loop's trigger and every step compresses.
func (s *Service) compressWindow(st *State, msgs []*heraldpb.ChatMessage) int64 {
	window := int64(s.contextWindow(st.Model))
	text := 0
	for _, m := range msgs {
		text += len(m.Content) + len(m.Reasoning)
		for _, c := range m.ToolCalls {
			text += len(c.Arguments)
		}
	}
	overhead := models.EstimateTokens(toolsChars(s.wireToolsFor(st, false)) + historyChars(msgs) - text)
	return max(window-overhead, window/4)
}

// wireToolsFor is the tool list a request of st sends (none for a grace call).
func (s *Service) wireToolsFor(st *State, grace bool) []*heraldpb.ToolSpec {
	if grace {
		return nil
	}
	return s.wireTools(s.toolsFor(st))
}

// logID is where a session's current transcript lives: its own id until a
// compression moves it to a child log.
func (st *State) logID() string {
	if st.LogSID != "" {
		return st.LogSID
	}
	return st.SessionID
}

// restartLog continues the session's transcript under a new log holding msgs;
// the old log stays as the new one's parent.
func (t *txn) restartLog(logID string, msgs []*heraldpb.ChatMessage) {
	t.st.Logs = append(t.st.Logs, t.st.logID())
	t.st.LogSID = logID
	t.msgs, t.baseChain = nil, 0
	t.appended = append([]*heraldpb.ChatMessage(nil), msgs...)
}
