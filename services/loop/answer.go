package loop

import (
	"fmt"
	"strings"

	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// Retry limits of BEHAVIOURS.md.
const (
	maxEmptyRetries    = 3
	maxThinkingRetries = 2
	maxContinuations   = 3
	maxInvalidStrikes  = 3
)

// Scaffolding texts: sent to the model to drive a retry, never persisted.
const (
	nudgeEmpty      = "Your last reply was empty. Please answer now: call a tool if something still needs doing, or give your final answer."
	nudgeAfterTools = "You have the tool results above. Continue the task: call the next tool, or give your final answer if you are done."
	nudgeThinking   = "You reasoned but wrote no answer. Write your answer (or your next tool call) now."
	nudgeContinue   = "Your previous reply was cut off by the output limit. Continue exactly where it stopped, without repeating anything."
	nudgeRepeat     = "You have made the same tool call with the same result several times in a row. Do not repeat it: use what you already found, try something different, or give your final answer."
	warnLastStep    = "Budget warning: this is your last step with tools. Finish the most important remaining action now; after it, tools are disabled and you will be asked for a summary."
	graceMaxIter    = "You have used all the steps this task allows, so tools are now disabled. Reply with a summary of what you have done, what you found, and what remains undone."
)

// onModelAnswer decides what a successful (or failed) model response means.
// An answer that completed empty after streaming text already carries that
// text: the gateway, which saw the stream, put it in.
func (s *Service) onModelAnswer(t *txn, resp *heraldpb.LLMResponse) error {
	st := t.st
	if resp.Error != "" {
		return s.onModelError(t, resp)
	}
	m := resp.Message
	if m == nil {
		m = &heraldpb.ChatMessage{}
	}
	moveThinking(m)
	s.checkPressure(t, resp)
	if st.Pending.Grace {
		final := strings.TrimSpace(m.Content)
		if final == "" {
			final = "The step budget ran out and the model gave no summary."
		}
		t.appendMsg(&heraldpb.ChatMessage{Role: "assistant", Content: final, Reasoning: m.Reasoning, ReasoningItems: m.ReasoningItems})
		return s.finish(t, st.GraceReason, final, "")
	}
	if resp.FinishReason == "length" {
		return s.onTruncated(t, m)
	}
	if resp.FinishReason == "content_filter" && len(m.ToolCalls) == 0 {
		return s.onRefused(t, m)
	}
	if st.PartialContent != "" {
		m.Content = st.PartialContent + m.Content
		st.PartialContent = ""
	}
	if len(m.ToolCalls) > 0 {
		return s.dispatchTools(t, m)
	}
	if strings.TrimSpace(m.Content) == "" {
		return s.onEmpty(t, m)
	}
	t.appendMsg(&heraldpb.ChatMessage{Role: "assistant", Content: m.Content, Reasoning: m.Reasoning, ReasoningItems: m.ReasoningItems})
	return s.finish(t, proto.ExitTextResponse, m.Content, "")
}

// onTruncated continues a reply cut off by the output limit; cut-off tool
// calls are never executed.
func (s *Service) onTruncated(t *txn, m *heraldpb.ChatMessage) error {
	st := t.st
	t.state(proto.StateErrorHandling)
	usable := strings.TrimSpace(m.Content) != ""
	if !usable && st.PartialContent == "" && strings.TrimSpace(m.Reasoning) != "" {
		return s.finish(t, proto.ExitTruncated, "", "the model's output limit ran out while it was still reasoning, before it wrote any answer; "+
			"raise the model's output limit or lower its reasoning effort")
	}
	if !usable && st.PartialContent == "" {
		return s.finish(t, proto.ExitTruncated, "", "the model's first response was cut off by its output limit before it produced anything usable")
	}
	st.PartialContent += m.Content
	if st.Continuations >= maxContinuations {
		final := st.PartialContent
		st.PartialContent = ""
		t.appendMsg(&heraldpb.ChatMessage{Role: "assistant", Content: final})
		return s.finish(t, proto.ExitTruncated, final, "the response was still cut off after 3 continuations")
	}
	st.Continuations++
	t.retryEvent("the answer was cut off by the output limit; asking for the rest")
	return s.requestModel(t, []scaffoldMsg{
		{Role: "assistant", Content: st.PartialContent},
		{Role: "user", Content: nudgeContinue},
	}, retry)
}

// onRefused ends a turn the provider's safety filter stopped: asking again
// would be refused again, so it fails at once, with the model's own words
// when it gave any.
func (s *Service) onRefused(t *txn, m *heraldpb.ChatMessage) error {
	t.state(proto.StateErrorHandling)
	why := strings.TrimSpace(t.st.PartialContent + m.Content)
	t.st.PartialContent = ""
	if why == "" {
		why = "The model gave no explanation."
	}
	final := "The model declined to answer this request (its provider's safety filter stopped it). " +
		"Rephrase the request or narrow its context. The model's explanation: " + why
	return s.finish(t, proto.ExitFailed, final, "content_policy: the response was stopped by the provider's content filter")
}

// onEmpty retries an empty reply: a nudge after tool results, prefill
// retries for thinking-only replies, plain retries, then the fallback
// provider, then gives up with an explanation.
func (s *Service) onEmpty(t *txn, m *heraldpb.ChatMessage) error {
	st := t.st
	t.state(proto.StateErrorHandling)
	hist := t.history()
	afterTools := len(hist) > 0 && hist[len(hist)-1].Role == "tool"
	thinking := strings.TrimSpace(m.Reasoning) != ""
	if text := housekeepingText(hist); afterTools && text != "" {
		return s.finish(t, proto.ExitTextResponse, text, "")
	}
	switch {
	case afterTools && !st.NudgedAfterTools:
		st.NudgedAfterTools = true
		t.retryEvent("empty answer after tool results; nudging the model")
		return s.requestModel(t, []scaffoldMsg{{Role: "user", Content: nudgeAfterTools}}, retry)
	case thinking && st.ThinkingRetries < maxThinkingRetries:
		st.ThinkingRetries++
		t.retryEvent("the model only reasoned; asking for the answer")
		return s.requestModel(t, []scaffoldMsg{{Role: "user", Content: nudgeThinking}}, retry)
	case !thinking && st.EmptyRetries < maxEmptyRetries:
		st.EmptyRetries++
		t.retryEvent("empty answer; retrying")
		return s.requestModel(t, []scaffoldMsg{{Role: "user", Content: nudgeEmpty}}, retry)
	case !st.PreferFallback && s.cfg.Fallbacks > 0:
		st.PreferFallback = true
		t.retryEvent("empty answers persist; trying the fallback provider")
		return s.requestModel(t, []scaffoldMsg{{Role: "user", Content: nudgeEmpty}}, retry)
	}
	tried := ""
	if st.PreferFallback {
		tried = ", including a try on the fallback provider"
	}
	explanation := fmt.Sprintf("The model returned no usable answer %d times in a row (empty or reasoning only%s), so the turn was stopped.", st.Attempt+1, tried)
	return s.finish(t, proto.ExitEmptyResponseExhausted, explanation, "")
}

// housekeepingTools only keep the agent's own notes; text written beside
// calls of these alone is the model's answer, said before it tidied up.
var housekeepingTools = map[string]bool{"memory": true, "todo": true, "session_search": true}

// housekeepingText is the text of the last assistant message when every
// call it made was housekeeping, else "". An empty reply after such a step
// means the model had already answered.
func housekeepingText(hist []*heraldpb.ChatMessage) string {
	for i := len(hist) - 1; i >= 0; i-- {
		m := hist[i]
		if m.Role != "assistant" {
			continue
		}
		if strings.TrimSpace(m.Content) == "" || len(m.ToolCalls) == 0 {
			return ""
		}
		for _, c := range m.ToolCalls {
			if !housekeepingTools[c.Name] {
				return ""
			}
		}
		return m.Content
	}
	return ""
}

// onModelError maps the gateway's error class to the turn's outcome.
func (s *Service) onModelError(t *txn, resp *heraldpb.LLMResponse) error {
	st := t.st
	t.state(proto.StateErrorHandling)
	reason := proto.ExitAllRetriesExhausted
	switch resp.ErrorClass {
	case "interrupted":
		return s.finish(t, proto.ExitInterrupted, "The user interrupted this turn before it finished.", "")
	case "auth":
		reason = proto.ExitAuthFailed
	case "budget_exceeded":
		reason = proto.ExitBudgetExhausted
	case "timeout":
		reason = proto.ExitTimeout
	case "context_overflow", "payload_too_large":
		if ok, err := s.onOverflow(t); ok {
			return err
		}
		if st.OverflowCompressions == 0 {
			reason = proto.ExitFailed // refused, and nothing was tried to make it fit
		}
	case "invalid_request", "billing", "model_not_found", "content_policy":
		// the provider refused the request itself: asking again cannot help
		reason = proto.ExitFailed
	}
	if reason == proto.ExitAllRetriesExhausted && st.Step >= st.MaxIterations-1 {
		reason = proto.ExitErrorNearMaxIterations
	}
	return s.finishFailed(t, reason, resp.Error, resp.PartialContent)
}

// finishFailed ends a turn whose model call failed. Text the user already
// saw (earlier parts of a continued answer, and what the call's last attempt
// streamed before it broke) stays the turn's answer, in the transcript too,
// rather than vanishing behind the error. An interrupted call never gets
// here: what it streamed is discarded.
func (s *Service) finishFailed(t *txn, reason, errText, streamed string) error {
	text := t.st.PartialContent + streamed
	t.st.PartialContent = ""
	if strings.TrimSpace(text) == "" {
		return s.finish(t, reason, "", errText)
	}
	t.appendMsg(&heraldpb.ChatMessage{Role: "assistant", Content: text})
	return s.finish(t, reason, text, errText)
}

// checkPressure emits context-pressure events at 85% and 95% of the
// model's window, at most once per cooldown.
func (s *Service) checkPressure(t *txn, resp *heraldpb.LLMResponse) {
	st := t.st
	if resp.PromptTokens <= 0 {
		return
	}
	window := s.contextWindow(st.Model)
	pct := int(resp.PromptTokens * 100 / int64(window))
	level := 0
	switch {
	case pct >= 95:
		level = 95
	case pct >= 85:
		level = 85
	}
	now := s.cfg.Now().UnixMilli()
	if level == 0 || (now-st.LastPressureMs < s.cfg.PressureCooldown.Milliseconds() && st.LastPressureMs != 0) {
		return
	}
	st.LastPressureMs, st.LastPressurePct = now, level
	t.event(proto.Event{Type: proto.EventContextPressure, Percent: pct, Tokens: resp.PromptTokens, Model: st.Model,
		Message: fmt.Sprintf("the conversation uses %d%% of %s's %d-token context window", pct, st.Model, window)})
}

// retryEvent tells watchers the loop is asking again, and why.
func (t *txn) retryEvent(why string) {
	t.event(proto.Event{Type: proto.EventRetry, Attempt: t.st.Attempt + 1, Step: t.st.Step, Message: why})
}
