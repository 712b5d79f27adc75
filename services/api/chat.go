package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/heraldrun/herald/proto"
)

// SessionHeader names the Herald session a Chat Completions request
// continues; responses carry it, so a client sends back what it got.
const SessionHeader = "X-Herald-Session"

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	Model         string    `json:"model"`
	Messages      []message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Metadata        map[string]string `json:"metadata"`
	ReasoningEffort string            `json:"reasoning_effort"`
	N               *int              `json:"n"`
	Tools           json.RawMessage   `json:"tools"`
	ToolChoice      json.RawMessage   `json:"tool_choice"`
	Functions       json.RawMessage   `json:"functions"`
	FunctionCall    json.RawMessage   `json:"function_call"`
	ResponseFormat  *struct {
		Type string `json:"type"`
	} `json:"response_format"`

	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	User                string          `json:"user"`
	Store               *bool           `json:"store"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Seed                *int            `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ServiceTier         string          `json:"service_tier"`
	PromptCacheKey      string          `json:"prompt_cache_key"`
	SafetyIdentifier    string          `json:"safety_identifier"`
}

func (req *chatRequest) validate() error {
	switch {
	case hasItems(req.Tools) || hasItems(req.Functions):
		return toolsRefused("client-defined tools")
	case hasItems(req.ToolChoice) && string(req.ToolChoice) != `"auto"` && string(req.ToolChoice) != `"none"`,
		hasItems(req.FunctionCall):
		return toolsRefused("tool_choice")
	case req.N != nil && *req.N != 1:
		return invalid("unsupported_parameter", "n must be 1: a Herald turn has one answer")
	case req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text":
		return invalid("unsupported_parameter", "response_format %q is not supported yet; ask for the format in the prompt", req.ResponseFormat.Type)
	case len(req.Messages) == 0:
		return invalid("invalid_messages", `"messages" must hold at least the user's message`)
	case !oneOf(req.ReasoningEffort, "", "none", "minimal", "low", "medium", "high", "xhigh"):
		return invalid("invalid_reasoning", "reasoning_effort must be none, minimal, low, medium, high or xhigh")
	}
	return checkMetadata(req.Metadata)
}

func (s *Service) chatCompletions(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req chatRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	conv, err := readConversation(req.Messages)
	if err != nil {
		return err
	}
	sid := strings.TrimSpace(r.Header.Get(SessionHeader))
	if sid != "" && !proto.IsToken(sid) {
		return invalid("invalid_session", "%s may hold only letters, digits, '-' and '_' (at most 128)", SessionHeader)
	}
	task := conv.task("", sid == "")
	task.SessionID, task.Model, task.Metadata = sid, taskModel(req.Model), req.Metadata
	if err := task.Validate(); err != nil {
		return invalid("invalid_messages", "%s", err)
	}
	rn := &run{ID: newID("chatcmpl-"), Kind: kindChat, Task: task, Model: req.Model, Metadata: req.Metadata}
	if _, err := s.startRun(ctx, p, rn); err != nil {
		return err
	}
	w.Header().Set(SessionHeader, rn.SessionID)
	if req.Stream {
		s.streamChat(w, r, rn, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return nil
	}
	res, err := s.waitResult(ctx, rn, nil)
	if err != nil {
		return err
	}
	if e := chatFailure(res); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": rn.ID, "object": "chat.completion", "created": rn.CreatedAt.Unix(), "model": chatModel(rn),
		"choices": []map[string]any{{"index": 0, "finish_reason": finishReason(res), "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": res.FinalResponse, "refusal": nil}}},
		"usage": chatUsage(res.Usage), "session_id": rn.SessionID,
	})
	return nil
}

// chatFailure is the error a turn that failed answers with (nil when it
// has an answer, complete or cut short).
func chatFailure(res *proto.Result) *apiError {
	if res.ExitReason == proto.ExitTextResponse || incompleteExit(res.ExitReason) || res.ExitReason == proto.ExitInterrupted {
		return nil
	}
	return &apiError{status: http.StatusBadGateway, typ: typeServer, code: res.ExitReason,
		message: "the agent's turn ended with " + res.ExitReason + ": " + firstNonEmpty(res.Error, res.FinalResponse)}
}

func finishReason(res *proto.Result) string {
	if incompleteExit(res.ExitReason) {
		return "length"
	}
	return "stop"
}

func chatModel(rn *run) string {
	if rn.Model == "" {
		return herald
	}
	return rn.Model
}

func chatUsage(u proto.Usage) map[string]any {
	prompt := promptTokens(u)
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": u.OutputTokens, "total_tokens": prompt + u.OutputTokens,
		"prompt_tokens_details":     map[string]int64{"cached_tokens": u.CacheReadTokens},
		"completion_tokens_details": map[string]int64{"reasoning_tokens": u.ReasoningTokens}}
}

// streamChat sends the turn as chat.completion.chunk events and [DONE].
func (s *Service) streamChat(w http.ResponseWriter, r *http.Request, rn *run, includeUsage bool) {
	sse := startSSE(w)
	chunk := func(delta map[string]any, finish any) {
		data, _ := json.Marshal(map[string]any{"id": rn.ID, "object": "chat.completion.chunk", "created": rn.CreatedAt.Unix(),
			"model": chatModel(rn), "choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}})
		sse.data(data)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	streamed := false
	res, err := s.waitResult(r.Context(), rn, func(ev sessionEvent) {
		if ev.Type == proto.EventDelta && ev.Ev.Delta != "" {
			streamed = true
			chunk(map[string]any{"content": ev.Ev.Delta}, nil)
		}
	})
	if err != nil {
		return
	}
	if e := chatFailure(res); e != nil {
		data, _ := json.Marshal(errorBody{Error: errorDetail{Message: e.message, Type: e.typ, Code: e.code}})
		sse.data(data)
		sse.data([]byte("[DONE]"))
		return
	}
	if !streamed && res.FinalResponse != "" {
		chunk(map[string]any{"content": res.FinalResponse}, nil)
	}
	chunk(map[string]any{}, finishReason(res))
	if includeUsage {
		data, _ := json.Marshal(map[string]any{"id": rn.ID, "object": "chat.completion.chunk", "created": rn.CreatedAt.Unix(),
			"model": chatModel(rn), "choices": []any{}, "usage": chatUsage(res.Usage)})
		sse.data(data)
	}
	sse.data([]byte("[DONE]"))
}
