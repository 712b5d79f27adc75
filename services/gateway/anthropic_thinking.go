package gateway

import (
	"encoding/json"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// interleavedThinkingBeta lets Claude 4 models think between tool calls
// (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#interleaved-thinking).
const interleavedThinkingBeta = "interleaved-thinking-2025-05-14"

// minThinkingBudget is the smallest budget_tokens the API takes.
const minThinkingBudget = 1024

type anthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

// limits sets max_tokens and thinking: the output limit is the caller's (or
// the default) bounded by the model's cap; with thinking, max_tokens grows
// to hold the budget and that limit, still within the cap, and a budget the
// cap leaves too little room for shrinks.
func (e *anthropicEncoder) limits(r *anthropicRequest, call modelCall) {
	r.MaxTokens = e.profile.outputLimit(call.model, call.maxOut, defaultMaxTokens)
	budget, maxTokens := e.thinking(call)
	if budget > 0 {
		r.MaxTokens = maxTokens
		r.Thinking = &anthropicThinking{Type: "enabled", BudgetTokens: budget}
	}
}

// thinking is the call's thinking budget and the max_tokens that holds it;
// 0 when the call asks none, the model takes none, or the history ends in
// a tool round whose assistant turn has no thinking block (the API refuses
// thinking then: the turn must start with one).
func (e *anthropicEncoder) thinking(call modelCall) (budget, maxTokens int64) {
	budget = call.reasoning.anthropicBudget()
	if budget <= 0 || !e.profile.anthropicThinks(call.model) || toolRoundWithoutThinking(call.messages) {
		return 0, 0
	}
	answer := e.profile.outputLimit(call.model, call.maxOut, defaultMaxTokens)
	maxTokens = budget + answer
	if c := e.profile.outputCap(call.model); c > 0 && maxTokens > c {
		maxTokens = c
		budget = min(budget, c-min(answer, c/2))
	}
	if budget < minThinkingBudget || budget >= maxTokens {
		return 0, 0
	}
	return budget, maxTokens
}

// interleaved: a thinking call with tools on a Claude 4 model asks for
// thinking between tool calls.
func (e *anthropicEncoder) interleaved(call modelCall) bool {
	if len(call.tools) == 0 && call.toolsKey == "" {
		return false
	}
	if b, _ := e.thinking(call); b == 0 {
		return false
	}
	return e.profile.Name != "anthropic" || anthropicInterleav.MatchString(shortModel(call.model))
}

// toolRoundWithoutThinking: the history ends in tool results answering an
// assistant turn that carries no Anthropic thinking block (written by
// another provider, or before thinking was asked for).
func toolRoundWithoutThinking(msgs []*heraldpb.ChatMessage) bool {
	i := len(msgs) - 1
	for i >= 0 && msgs[i].GetRole() == "tool" {
		i--
	}
	if i == len(msgs)-1 || i < 0 || msgs[i].GetRole() != "assistant" || len(msgs[i].GetToolCalls()) == 0 {
		return false
	}
	for _, it := range msgs[i].GetReasoningItems() {
		if it.GetApiMode() == ModeAnthropicMessages {
			return false
		}
	}
	return true
}

// thinkingBlocks are the thinking and redacted_thinking blocks of an
// assistant message, as the model produced them: they open its turn.
func thinkingBlocks(m *heraldpb.ChatMessage) []anthropicBlock {
	var blocks []anthropicBlock
	for _, it := range m.GetReasoningItems() {
		if it.GetApiMode() != ModeAnthropicMessages {
			continue
		}
		var b anthropicOutputBlock
		if json.Unmarshal([]byte(it.GetJson()), &b) != nil || (b.Type != "thinking" && b.Type != "redacted_thinking") {
			continue
		}
		block := anthropicBlock{Type: b.Type, Signature: b.Signature, Data: b.Data}
		if b.Type == "thinking" {
			block.Thinking = &b.Thinking
		}
		blocks = append(blocks, block)
	}
	return blocks
}

func hasThinking(m *heraldpb.ChatMessage) bool {
	for _, it := range m.GetReasoningItems() {
		if it.GetApiMode() == ModeAnthropicMessages {
			return true
		}
	}
	return false
}

func isThinking(b anthropicBlock) bool { return b.Type == "thinking" || b.Type == "redacted_thinking" }

// reasoningItem keeps a thinking or redacted_thinking block for the turn's
// later requests.
func (b anthropicOutputBlock) reasoningItem() *heraldpb.ReasoningItem {
	var v any = struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}{b.Type, b.Thinking, b.Signature}
	if b.Type == "redacted_thinking" {
		v = struct {
			Type string `json:"type"`
			Data string `json:"data"`
		}{b.Type, b.Data}
	}
	data, _ := json.Marshal(v) // strings always encode
	return &heraldpb.ReasoningItem{ApiMode: ModeAnthropicMessages, Json: string(data)}
}
