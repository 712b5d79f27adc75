package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The OpenAI Responses API (/v1/responses): input items in, output items out.
var responsesAPI = wireAPI{parse: parseResponses, object: responseObject, stream: writeResponsesStream}

type responsesBody struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions"`
	Input        json.RawMessage   `json:"input"`
	Tools        []json.RawMessage `json:"tools"`
	Stream       bool              `json:"stream"`
}

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// parseResponses maps input items onto chat-style Messages so scripts work
// alike for every API: function calls join the assistant message before them.
func parseResponses(body []byte, req *Request) error {
	var b responsesBody
	if err := json.Unmarshal(body, &b); err != nil {
		return err
	}
	req.Model, req.Tools, req.Stream = b.Model, b.Tools, b.Stream
	if b.Instructions != "" {
		req.Messages = append(req.Messages, Message{Role: "system", Content: b.Instructions})
	}
	var text string
	if json.Unmarshal(b.Input, &text) == nil {
		req.Messages = append(req.Messages, Message{Role: "user", Content: text})
		return nil
	}
	var items []responsesItem
	if err := json.Unmarshal(b.Input, &items); err != nil {
		return err
	}
	for _, it := range items {
		req.Messages = appendResponsesItem(req.Messages, it)
	}
	return nil
}

func appendResponsesItem(msgs []Message, it responsesItem) []Message {
	switch it.Type {
	case "function_call":
		call := WireCall{ID: it.CallID, Type: "function"}
		call.Function.Name, call.Function.Arguments = it.Name, it.Arguments
		if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs
		}
		return append(msgs, Message{Role: "assistant", ToolCalls: []WireCall{call}})
	case "function_call_output":
		return append(msgs, Message{Role: "tool", ToolCallID: it.CallID, Content: rawText(it.Output)})
	case "reasoning":
		return msgs
	default:
		return append(msgs, Message{Role: it.Role, Content: rawText(it.Content)})
	}
}

// rawText reads a string or a list of text parts.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []any
	_ = json.Unmarshal(raw, &parts)
	return Message{Content: parts}.Text()
}

func responsesOutput(req *Request, reply Reply) []any {
	var out []any
	if reply.Reasoning != "" {
		item := map[string]any{"type": "reasoning", "id": "rs_1",
			"summary": []any{map[string]any{"type": "summary_text", "text": reply.Reasoning}}}
		if reply.Signature != "" {
			item["id"], item["encrypted_content"] = "rs_"+reply.Signature, reply.Signature
		}
		out = append(out, item)
	}
	if reply.Content != "" {
		out = append(out, map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Content, "annotations": []any{}}}})
	}
	for i, c := range reply.ToolCalls {
		out = append(out, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", i),
			"call_id": callID(req, i, c), "name": c.Name, "arguments": c.Args, "status": "completed"})
	}
	return out
}

func responseObject(req *Request, reply Reply) any {
	u := tokens(req, reply)
	obj := map[string]any{
		"id": "resp_scripted", "object": "response", "created_at": time.Now().Unix(),
		"model": modelName(req), "status": "completed", "output": responsesOutput(req, reply),
		"usage": map[string]any{
			"input_tokens":          u.PromptTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CachedTokens},
			"output_tokens":         u.CompletionTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens":          u.PromptTokens + u.CompletionTokens,
		},
	}
	switch finishReason(reply) {
	case "length":
		obj["status"], obj["incomplete_details"] = "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		obj["status"], obj["incomplete_details"] = "incomplete", map[string]any{"reason": "content_filter"}
	}
	return obj
}

func writeResponsesStream(w http.ResponseWriter, req *Request, reply Reply) {
	send := sseWriter(w, reply)
	seq := 0
	event := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		send(typ, fields)
	}
	event("response.created", map[string]any{"response": map[string]any{"id": "resp_scripted", "object": "response",
		"status": "in_progress", "model": modelName(req), "output": []any{}}})
	for _, part := range split(reply.Reasoning, reply.ChunkChars) {
		event("response.reasoning_summary_text.delta", map[string]any{"item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": part})
	}
	for _, part := range split(reply.Content, reply.ChunkChars) {
		event("response.output_text.delta", map[string]any{"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": part})
	}
	done := "response.completed"
	if finishReason(reply) == "length" || finishReason(reply) == "content_filter" {
		done = "response.incomplete"
	}
	event(done, map[string]any{"response": responseObject(req, reply)})
}

// sseWriter writes named server-sent events, dropping the connection after
// reply.CutAfter events when the reply asks for a cut.
func sseWriter(w http.ResponseWriter, reply Reply) func(name string, v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	sent := 0
	return func(name string, v any) {
		if reply.CutAfter > 0 && sent >= reply.CutAfter {
			panic(http.ErrAbortHandler)
		}
		sent++
		data, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		if flusher != nil {
			flusher.Flush()
		}
	}
}
