package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

func finishReason(reply Reply) string {
	switch {
	case reply.FinishReason != "":
		return reply.FinishReason
	case len(reply.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func callID(req *Request, i int, c Call) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_%d_%d", req.AssistantCount(), i)
}

func wireCalls(req *Request, reply Reply) []map[string]any {
	var out []map[string]any
	for i, c := range reply.ToolCalls {
		out = append(out, map[string]any{
			"id": callID(req, i, c), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Args},
		})
	}
	return out
}

// tokens estimates tokens as characters/4 unless the reply sets them.
func tokens(req *Request, reply Reply) *Usage {
	if reply.Usage != nil {
		return reply.Usage
	}
	out := len(reply.Content) + len(reply.Reasoning)
	for _, c := range reply.ToolCalls {
		out += len(c.Name) + len(c.Args)
	}
	return &Usage{PromptTokens: int64(len(req.Raw)/4 + 1), CompletionTokens: int64(out/4 + 1)}
}

func usage(req *Request, reply Reply) map[string]any {
	u := tokens(req, reply)
	prompt := map[string]any{"cached_tokens": u.CachedTokens}
	if u.CacheWriteTokens > 0 {
		prompt["cache_write_tokens"] = u.CacheWriteTokens
	}
	return map[string]any{
		"prompt_tokens":             u.PromptTokens,
		"completion_tokens":         u.CompletionTokens,
		"total_tokens":              u.PromptTokens + u.CompletionTokens,
		"prompt_tokens_details":     prompt,
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
	}
}

func completion(req *Request, reply Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": reply.Content}
	if reply.Reasoning != "" {
		msg["reasoning_content"] = reply.Reasoning
	}
	if calls := wireCalls(req, reply); len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": "chatcmpl-scripted", "object": "chat.completion", "created": time.Now().Unix(),
		"model":   modelName(req),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(reply)}},
		"usage":   usage(req, reply),
	}
}

func modelName(req *Request) string {
	if req.Model == "" {
		return "scripted"
	}
	return req.Model
}

func chunk(req *Request, delta map[string]any, finish any) map[string]any {
	return map[string]any{
		"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": time.Now().Unix(),
		"model":   modelName(req),
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
}

func split(s string, n int) []string {
	if n <= 0 {
		n = 8
	}
	var parts []string
	for len(s) > n {
		parts = append(parts, s[:n])
		s = s[n:]
	}
	if s != "" {
		parts = append(parts, s)
	}
	return parts
}

func writeStream(w http.ResponseWriter, req *Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	sent := 0
	send := func(v any) {
		if reply.CutAfter > 0 && sent >= reply.CutAfter {
			panic(http.ErrAbortHandler) // the connection drops mid-stream
		}
		sent++
		data, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(chunk(req, map[string]any{"role": "assistant", "content": ""}, nil))
	for _, part := range split(reply.Reasoning, reply.ChunkChars) {
		send(chunk(req, map[string]any{"reasoning_content": part}, nil))
	}
	for _, part := range split(reply.Content, reply.ChunkChars) {
		send(chunk(req, map[string]any{"content": part}, nil))
	}
	for i, c := range wireCalls(req, reply) {
		fn := c["function"].(map[string]any)
		send(chunk(req, map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": fn["arguments"]},
		}}}, nil))
	}
	send(chunk(req, map[string]any{}, finishReason(reply)))
	final := chunk(req, map[string]any{}, nil)
	final["choices"] = []any{}
	final["usage"] = usage(req, reply)
	send(final)
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}
