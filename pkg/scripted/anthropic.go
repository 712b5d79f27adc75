package scripted

import (
	"encoding/json"
	"net/http"
)

// The Anthropic Messages API (/v1/messages): content blocks in and out.
var anthropicAPI = wireAPI{parse: parseAnthropic, object: anthropicMessage, stream: writeAnthropicStream}

type anthropicBody struct {
	Model    string            `json:"model"`
	System   json.RawMessage   `json:"system"`
	Messages []anthropicTurn   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Stream   bool              `json:"stream"`
}

type anthropicTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// parseAnthropic maps turns of content blocks onto chat-style Messages:
// tool_result blocks become tool messages, tool_use blocks tool calls.
func parseAnthropic(body []byte, req *Request) error {
	var b anthropicBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	req.Model, req.Tools, req.Stream = b.Model, b.Tools, b.Stream
	if len(b.System) > 0 {
		if sys := rawText(b.System); sys != "" {
			req.Messages = append(req.Messages, Message{Role: "system", Content: sys})
		}
	}
	for _, turn := range b.Messages {
		msgs, err := anthropicTurnMessages(turn)
		if err != nil {
			return err
		}
		req.Messages = append(req.Messages, msgs...)
	}
	return nil
}

func anthropicTurnMessages(turn anthropicTurn) ([]Message, error) {
	var text string
	if json.Unmarshal(turn.Content, &text) == nil {
		return []Message{{Role: turn.Role, Content: text}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(turn.Content, &blocks); err != nil {
		return nil, err
	}
	var out []Message
	main := Message{Role: turn.Role}
	body := ""
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			body += bl.Text
		case "thinking":
			main.Reasoning += bl.Thinking
		case "tool_use":
			call := WireCall{ID: bl.ID, Type: "function"}
			call.Function.Name, call.Function.Arguments = bl.Name, string(bl.Input)
			main.ToolCalls = append(main.ToolCalls, call)
		case "tool_result":
			out = append(out, Message{Role: "tool", ToolCallID: bl.ToolUseID, Content: rawText(bl.Content)})
		}
	}
	main.Content = body
	if body != "" || len(main.ToolCalls) > 0 || main.Reasoning != "" || len(out) == 0 {
		out = append(out, main)
	}
	return out, nil
}

func anthropicStopReason(reply Reply) string {
	switch finishReason(reply) {
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	case "content_filter":
		return "refusal"
	default:
		return "end_turn"
	}
}

func anthropicBlocks(req *Request, reply Reply) []map[string]any {
	var out []map[string]any
	if reply.Reasoning != "" {
		sig := reply.Signature
		if sig == "" {
			sig = "scripted-signature"
		}
		out = append(out, map[string]any{"type": "thinking", "thinking": reply.Reasoning, "signature": sig})
	}
	if reply.RedactedThinking != "" {
		out = append(out, map[string]any{"type": "redacted_thinking", "data": reply.RedactedThinking})
	}
	if reply.Content != "" {
		out = append(out, map[string]any{"type": "text", "text": reply.Content})
	}
	for i, c := range reply.ToolCalls {
		var input any = map[string]any{}
		_ = json.Unmarshal([]byte(c.Args), &input)
		out = append(out, map[string]any{"type": "tool_use", "id": callID(req, i, c), "name": c.Name, "input": input})
	}
	return out
}

func anthropicUsage(req *Request, reply Reply) map[string]any {
	u := tokens(req, reply)
	return map[string]any{
		"input_tokens":                u.PromptTokens - u.CachedTokens - u.CacheWriteTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
		"cache_read_input_tokens":     u.CachedTokens,
		"output_tokens":               u.CompletionTokens,
	}
}

func anthropicMessage(req *Request, reply Reply) any {
	return map[string]any{
		"id": "msg_scripted", "type": "message", "role": "assistant", "model": modelName(req),
		"content": anthropicBlocks(req, reply), "stop_reason": anthropicStopReason(reply),
		"stop_sequence": nil, "usage": anthropicUsage(req, reply),
	}
}

func writeAnthropicStream(w http.ResponseWriter, req *Request, reply Reply) {
	send := sseWriter(w, reply)
	start := anthropicUsage(req, reply)
	outTokens := start["output_tokens"]
	start["output_tokens"] = 1
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_scripted", "type": "message", "role": "assistant", "model": modelName(req),
		"content": []any{}, "stop_reason": nil, "usage": start}})
	for i, bl := range anthropicBlocks(req, reply) {
		streamAnthropicBlock(send, i, bl, reply.ChunkChars)
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStopReason(reply), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outTokens}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

func streamAnthropicBlock(send func(string, any), index int, bl map[string]any, chunk int) {
	delta := func(d map[string]any) {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d})
	}
	switch bl["type"] {
	case "text":
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, p := range split(bl["text"].(string), chunk) {
			delta(map[string]any{"type": "text_delta", "text": p})
		}
	case "thinking":
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "thinking", "thinking": ""}})
		for _, p := range split(bl["thinking"].(string), chunk) {
			delta(map[string]any{"type": "thinking_delta", "thinking": p})
		}
		delta(map[string]any{"type": "signature_delta", "signature": bl["signature"]})
	case "redacted_thinking":
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": bl})
	case "tool_use":
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": bl["id"], "name": bl["name"], "input": map[string]any{}}})
		args, _ := json.Marshal(bl["input"])
		for _, p := range split(string(args), chunk) {
			delta(map[string]any{"type": "input_json_delta", "partial_json": p})
		}
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}
