package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/heraldrun/herald/proto"
)

// The OpenAI Responses API: one request is one Herald turn.

// reasoningParam is the Responses API's reasoning option.
type reasoningParam struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// responsesRequest is POST /v1/responses. Options that cannot change a
// Herald turn are accepted and ignored, as OpenAI ignores them for models
// that do not take them; anything else unknown is refused.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       string            `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Metadata           map[string]string `json:"metadata"`
	Stream             bool              `json:"stream"`
	Reasoning          *reasoningParam   `json:"reasoning"`
	Tools              json.RawMessage   `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Background         bool              `json:"background"`
	Conversation       json.RawMessage   `json:"conversation"`

	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	User              string          `json:"user"`
	Store             *bool           `json:"store"`
	MaxOutputTokens   *int            `json:"max_output_tokens"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Truncation        string          `json:"truncation"`
	ServiceTier       string          `json:"service_tier"`
	Include           []string        `json:"include"`
	Text              json.RawMessage `json:"text"`
	StreamOptions     json.RawMessage `json:"stream_options"`
	PromptCacheKey    string          `json:"prompt_cache_key"`
	SafetyIdentifier  string          `json:"safety_identifier"`
}

func (req *responsesRequest) validate() error {
	switch {
	case hasItems(req.Tools):
		return toolsRefused("client-defined tools")
	case hasItems(req.ToolChoice) && string(req.ToolChoice) != `"auto"` && string(req.ToolChoice) != `"none"`:
		return toolsRefused("tool_choice")
	case req.Background:
		return invalid("unsupported_parameter", "background responses are not supported; use POST /v1/runs for work to follow later")
	case hasItems(req.Conversation):
		return invalid("unsupported_parameter", "conversation is not supported; continue with previous_response_id")
	case len(req.Input) == 0 || string(req.Input) == "null":
		return invalid("missing_input", `"input" is required: a string or a list of messages`)
	case req.Reasoning != nil && !oneOf(req.Reasoning.Effort, "", "none", "minimal", "low", "medium", "high", "xhigh"):
		return invalid("invalid_reasoning", "reasoning.effort must be none, minimal, low, medium, high or xhigh")
	case req.Reasoning != nil && !oneOf(req.Reasoning.Summary, "", "auto", "concise", "detailed"):
		return invalid("invalid_reasoning", "reasoning.summary must be auto, concise or detailed")
	}
	return checkMetadata(req.Metadata)
}

func hasItems(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null" && s != "[]"
}

func oneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func (req *responsesRequest) conversation() (conversation, error) {
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return conversation{}, invalid("missing_input", `"input" is empty`)
		}
		return conversation{prompt: s}, nil
	}
	var msgs []message
	if err := json.Unmarshal(req.Input, &msgs); err != nil || len(msgs) == 0 {
		return conversation{}, invalid("invalid_input", `"input" must be a string or a non-empty list of messages`)
	}
	return readConversation(msgs)
}

func (s *Service) createResponse(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req responsesRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	conv, err := req.conversation()
	if err != nil {
		return err
	}
	sid := ""
	if req.PreviousResponseID != "" {
		prev, err := s.runs.get(ctx, p, req.PreviousResponseID)
		if err != nil || prev.Kind != kindResponse {
			return notFound("response", req.PreviousResponseID)
		}
		sid = prev.SessionID
	}
	task := conv.task(req.Instructions, sid == "")
	task.SessionID, task.Model, task.Metadata = sid, taskModel(req.Model), req.Metadata
	if err := task.Validate(); err != nil {
		return invalid("invalid_input", "%s", err)
	}
	rn := &run{ID: newID("resp_"), Kind: kindResponse, Task: task, Model: req.Model, Instructions: req.Instructions,
		PreviousResponseID: req.PreviousResponseID, Metadata: req.Metadata, Reasoning: req.Reasoning}
	if _, err := s.startRun(ctx, p, rn); err != nil {
		return err
	}
	if req.Stream {
		s.streamResponse(w, r, rn)
		return nil
	}
	res, err := s.waitResult(ctx, rn, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.responseObject(rn, res))
	return nil
}

func (s *Service) getResponse(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("id")
	rn, err := s.runs.get(r.Context(), p, id)
	if err != nil || rn.Kind != kindResponse {
		return notFound("response", id)
	}
	res, err := s.runs.result(r.Context(), rn)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.responseObject(rn, res))
	return nil
}

// response is the Responses API's response object.
type response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Model              string            `json:"model"`
	Output             []outputItem      `json:"output"`
	Usage              *responseUsage    `json:"usage"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Metadata           map[string]string `json:"metadata"`
	Reasoning          reasoningParam    `json:"reasoning"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	Text               map[string]any    `json:"text"`
	Store              bool              `json:"store"`
	// Herald's own: the session the turn ran in and how it ended.
	SessionID  string  `json:"session_id"`
	ExitReason string  `json:"exit_reason,omitempty"`
	CostUSD    float64 `json:"cost_usd"`
}

type outputItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputPart `json:"content"`
}

type outputPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

// responseStatus maps a turn's exit to the Responses API's status.
func responseStatus(res *proto.Result) string {
	switch {
	case res == nil:
		return "in_progress"
	case res.ExitReason == proto.ExitTextResponse:
		return "completed"
	case res.ExitReason == proto.ExitInterrupted:
		return "cancelled"
	case incompleteExit(res.ExitReason):
		return "incomplete"
	}
	return "failed"
}

func incompleteExit(reason string) bool {
	return oneOf(reason, proto.ExitTruncated, proto.ExitMaxIterations, proto.ExitBudgetExhausted)
}

func messageID(rn *run) string { return "msg_" + strings.TrimPrefix(rn.ID, "resp_") }

func (s *Service) responseObject(rn *run, res *proto.Result) response {
	model := rn.Model
	if model == "" {
		model = herald
	}
	o := response{ID: rn.ID, Object: "response", CreatedAt: rn.CreatedAt.Unix(), Status: responseStatus(res), Model: model,
		Output: []outputItem{}, Metadata: rn.Metadata, ToolChoice: "auto", Tools: []any{},
		Text: map[string]any{"format": map[string]string{"type": "text"}}, Store: true, SessionID: rn.SessionID}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	if rn.Instructions != "" {
		o.Instructions = &rn.Instructions
	}
	if rn.PreviousResponseID != "" {
		o.PreviousResponseID = &rn.PreviousResponseID
	}
	if rn.Reasoning != nil {
		o.Reasoning = *rn.Reasoning
	}
	if res == nil {
		return o
	}
	o.ExitReason, o.CostUSD = res.ExitReason, res.CostUSD
	o.Usage = usageOf(res.Usage)
	switch o.Status {
	case "failed":
		o.Error = &responseError{Code: res.ExitReason, Message: firstNonEmpty(res.Error, res.FinalResponse)}
	case "incomplete":
		o.IncompleteDetails = &incomplete{Reason: res.ExitReason}
	}
	if res.FinalResponse != "" && o.Status != "failed" {
		o.Output = []outputItem{textItem(rn, res.FinalResponse, "completed")}
	}
	return o
}

func textItem(rn *run, text, status string) outputItem {
	return outputItem{Type: "message", ID: messageID(rn), Status: status, Role: "assistant",
		Content: []outputPart{{Type: "output_text", Text: text, Annotations: []any{}}}}
}

func usageOf(u proto.Usage) *responseUsage {
	ru := &responseUsage{InputTokens: promptTokens(u), OutputTokens: u.OutputTokens}
	ru.InputTokensDetails.CachedTokens = u.CacheReadTokens
	ru.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	ru.TotalTokens = ru.InputTokens + ru.OutputTokens
	return ru
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// streamResponse sends the turn as the Responses API's SSE events.
func (s *Service) streamResponse(w http.ResponseWriter, r *http.Request, rn *run) {
	sse := startSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		data, _ := json.Marshal(fields)
		sse.event("", typ, data)
	}
	send("response.created", map[string]any{"response": s.responseObject(rn, nil)})
	send("response.in_progress", map[string]any{"response": s.responseObject(rn, nil)})
	item := map[string]any{"item_id": messageID(rn), "output_index": 0, "content_index": 0}
	var text strings.Builder
	opened := false
	open := func() {
		if opened {
			return
		}
		opened = true
		send("response.output_item.added", map[string]any{"output_index": 0, "item": outputItem{Type: "message",
			ID: messageID(rn), Status: "in_progress", Role: "assistant", Content: []outputPart{}}})
		send("response.content_part.added", with(item, "part", outputPart{Type: "output_text", Annotations: []any{}}))
	}
	res, err := s.waitResult(r.Context(), rn, func(ev sessionEvent) {
		if ev.Type == proto.EventDelta && ev.Ev.Delta != "" {
			open()
			text.WriteString(ev.Ev.Delta)
			send("response.output_text.delta", with(with(item, "delta", ev.Ev.Delta), "logprobs", []any{}))
		}
	})
	if err != nil {
		return // the client went away; the turn goes on, GET /v1/responses/{id} has it
	}
	final := s.responseObject(rn, res)
	if final.Status == "failed" {
		send("response.failed", map[string]any{"response": final})
		return
	}
	answer := res.FinalResponse
	if !opened && answer != "" {
		open()
		send("response.output_text.delta", with(with(item, "delta", answer), "logprobs", []any{}))
	}
	if opened {
		send("response.output_text.done", with(with(item, "text", answer), "logprobs", []any{}))
		send("response.content_part.done", with(item, "part", outputPart{Type: "output_text", Text: answer, Annotations: []any{}}))
		send("response.output_item.done", map[string]any{"output_index": 0, "item": textItem(rn, answer, "completed")})
	}
	end := "response.completed"
	if final.Status == "incomplete" || final.Status == "cancelled" {
		end = "response.incomplete"
	}
	send(end, map[string]any{"response": final})
}

// with is fields plus one more, leaving fields as they were.
func with(fields map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(fields)+1)
	for key, val := range fields {
		out[key] = val
	}
	out[k] = v
	return out
}
