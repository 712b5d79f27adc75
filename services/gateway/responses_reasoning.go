package gateway

import (
	"encoding/json"
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// reasoningParts are a reasoning item's readable parts: its summary parts
// (OpenAI) and, where a server sends its reasoning itself, its
// reasoning_text parts (LM Studio). Each is a paragraph of the message's
// reasoning.
func reasoningParts(item responses.ResponseOutputItemUnion) []string {
	var parts []string
	for _, s := range item.Summary {
		if strings.TrimSpace(s.Text) != "" {
			parts = append(parts, s.Text)
		}
	}
	for _, c := range item.Content {
		if c.Type == "reasoning_text" && strings.TrimSpace(c.Text) != "" {
			parts = append(parts, c.Text)
		}
	}
	return parts
}

// keptReasoning is a reasoning item to send back within the turn: one that
// carries encrypted content (with store: false the provider holds nothing,
// and an item without it would be refused as unknown), as the provider
// sent it. nil for any other.
func keptReasoning(item responses.ResponseOutputItemUnion) *heraldpb.ReasoningItem {
	if item.EncryptedContent == "" || item.RawJSON() == "" {
		return nil
	}
	return &heraldpb.ReasoningItem{ApiMode: ModeCodexResponses, Json: item.RawJSON()}
}

// reasoningInputs are an assistant message's kept reasoning items as input
// items, before its text and calls, byte for byte as they came.
func reasoningInputs(m *heraldpb.ChatMessage) responses.ResponseInputParam {
	var items responses.ResponseInputParam
	for _, it := range m.GetReasoningItems() {
		if it.GetApiMode() != ModeCodexResponses || !json.Valid([]byte(it.GetJson())) {
			continue
		}
		items = append(items, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(it.GetJson())))
	}
	return items
}
