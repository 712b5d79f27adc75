package hooks

import "encoding/json"

// SessionStart is the on_session_start event: a session's first turn began.
type SessionStart struct {
	SessionID string `json:"session_id"`
	TaskID    string `json:"task_id"`
	Tenant    string `json:"tenant"`
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
}

// LLMCall is the pre_llm_call request, sent before each model call of a turn.
type LLMCall struct {
	SessionID string `json:"session_id"`
	TaskID    string `json:"task_id"`
	Tenant    string `json:"tenant"`
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`
	// UserMessage is the prompt that started this turn.
	UserMessage string `json:"user_message"`
}

// LLMContext is a pre_llm_call reply: context added to the turn's user
// message for this call only.
type LLMContext struct {
	Context *string `json:"context"`
}

// APIRequest is the pre_api_request event, published before every attempt
// on a provider; RequestID is the attempt's own id, the same in its post event.
type APIRequest struct {
	RequestID string `json:"request_id"`
	SessionID string `json:"session_id"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Attempt   int    `json:"attempt"`
	// Turn and Step place the call in its session (beyond the contract:
	// one turn's calls share Turn, as Hermes' turn_id).
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// APIResponse is the post_api_request event, published after every attempt.
type APIResponse struct {
	APIRequest
	Usage      Usage   `json:"usage"`
	CostUSD    float64 `json:"cost_usd"`
	LatencyMS  int64   `json:"latency_ms"`
	Status     string  `json:"status"`
	ErrorClass string  `json:"error_class,omitempty"`
}

// Usage has the keys of the result JSON's usage object.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// ToolCall is the pre_tool_call request, sent before every tool call.
type ToolCall struct {
	SessionID string `json:"session_id"`
	TaskID    string `json:"task_id,omitempty"`
	Tenant    string `json:"tenant"`
	CallID    string `json:"call_id,omitempty"`
	Tool      string `json:"tool"`
	// Arguments is the call's JSON object (a JSON string when the model's
	// text was not valid JSON).
	Arguments json.RawMessage `json:"arguments"`
}

// ToolVerdict is a pre_tool_call reply.
type ToolVerdict struct {
	Allow  *bool  `json:"allow"`
	Reason string `json:"reason"`
}

// ArgumentsJSON is arguments as they go into a ToolCall.
func ArgumentsJSON(arguments string) json.RawMessage {
	if arguments == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(arguments)) {
		return json.RawMessage(arguments)
	}
	quoted, _ := json.Marshal(arguments)
	return quoted
}
