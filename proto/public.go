package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Task is a job published on herald.tasks.
type Task struct {
	Prompt        string            `json:"prompt"`
	SessionID     string            `json:"session_id,omitempty"`
	TaskID        string            `json:"task_id,omitempty"`
	SystemMessage string            `json:"system_message,omitempty"`
	Model         string            `json:"model,omitempty"`
	MaxIterations int               `json:"max_iterations,omitempty"`
	MaxCostUSD    float64           `json:"max_cost_usd,omitempty"`
	Tenant        string            `json:"tenant,omitempty"`
	Toolsets      []string          `json:"toolsets,omitempty"`
	Workspace     string            `json:"workspace,omitempty"`
	Pool          string            `json:"pool,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// ParentSessionID marks a delegated child session (set by the loop only).
	ParentSessionID string `json:"parent_session_id,omitempty"`
	// Yes pre-approves dangerous commands for this task (herald run --yes).
	Yes bool `json:"yes,omitempty"`
	// ReasoningEffort asks reasoning models for minimal, low, medium or high
	// effort, or off (none asked); "" keeps herald.yaml's reasoning settings.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// APIKeyID and ScheduleID name the API key and the schedule that
	// started the task, whose budgets its model calls are charged to. Set
	// by the api service (on herald.apitasks*) and the loop (a subagent
	// inherits its parent's) only; refused on herald.tasks*.
	APIKeyID   string `json:"api_key_id,omitempty"`
	ScheduleID string `json:"schedule_id,omitempty"`
	// BoundTenant is the tenant the task's subject (herald.tasks.<tenant>)
	// binds it to, set by the loop; a body cannot set it.
	BoundTenant string `json:"-"`
}

// ErrInvalidTask is wrapped by every DecodeTask error.
var ErrInvalidTask = errors.New("invalid task")

// MaxPromptBytes bounds a task's prompt; larger tasks are dead-lettered.
const MaxPromptBytes = 256 << 10

// DecodeTask parses and validates a task payload, rejecting unknown fields so
// a misspelt key is reported instead of silently ignored.
func DecodeTask(data []byte) (Task, error) {
	var t Task
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Task{}, fmt.Errorf("%w: not a JSON task object: %v", ErrInvalidTask, err)
	}
	if dec.More() {
		return Task{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidTask)
	}
	return t, t.Validate()
}

// Validate reports what is wrong with a task, naming the field.
func (t Task) Validate() error {
	switch {
	case strings.TrimSpace(t.Prompt) == "":
		return fmt.Errorf("%w: field \"prompt\" is required and must not be empty", ErrInvalidTask)
	case len(t.Prompt) > MaxPromptBytes:
		return fmt.Errorf("%w: field \"prompt\" is %d bytes, the limit is %d", ErrInvalidTask, len(t.Prompt), MaxPromptBytes)
	case t.MaxIterations < 0:
		return fmt.Errorf("%w: field \"max_iterations\" must be positive", ErrInvalidTask)
	case t.MaxCostUSD < 0:
		return fmt.Errorf("%w: field \"max_cost_usd\" must not be negative", ErrInvalidTask)
	case !ValidReasoningEffort(t.ReasoningEffort):
		return fmt.Errorf("%w: field \"reasoning_effort\" must be minimal, low, medium, high or off (got %q)", ErrInvalidTask, t.ReasoningEffort)
	}
	for name, v := range map[string]string{"session_id": t.SessionID, "tenant": t.Tenant, "pool": t.Pool,
		"api_key_id": t.APIKeyID, "schedule_id": t.ScheduleID} {
		if v != "" && !IsToken(v) {
			return fmt.Errorf("%w: field %q may hold only letters, digits, '-' and '_' (got %q)", ErrInvalidTask, name, v)
		}
	}
	if strings.Contains(t.Workspace, "..") || strings.HasPrefix(t.Workspace, "/") {
		return fmt.Errorf("%w: field \"workspace\" must be a relative folder without '..'", ErrInvalidTask)
	}
	return nil
}

// ValidReasoningEffort reports whether e is a reasoning effort a task may
// ask for ("" leaves herald.yaml's settings).
func ValidReasoningEffort(e string) bool {
	switch e {
	case "", "minimal", "low", "medium", "high", "off":
		return true
	}
	return false
}

// IsToken reports whether s can be used as one NATS subject token.
func IsToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		ok := r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

// Event types published on herald.session.<sid>.events.
const (
	EventState           = "state"
	EventDelta           = "delta"
	EventToolStarted     = "tool_started"
	EventToolFinished    = "tool_finished"
	EventRetry           = "retry"
	EventFallback        = "fallback"
	EventCompression     = "compression"
	EventContextPressure = "context_pressure"
	EventResult          = "result"
	EventApproval        = "approval_required"
	EventClarify         = "clarify"
	EventError           = "error"
	// EventWarning reports something the session went on without, or waits
	// on and may never get: a context file skipped (File names it, Message
	// says why), context files no tool runner answered for, a tool call no
	// runner of its pool takes.
	EventWarning = "warning"
	// EventQueued says a task waits for its tenant's limit
	// (max_concurrent_sessions): Position 1 starts next. It comes again
	// each time the position changes, until the turn starts. A model call
	// that waits says so too: for its tenant's max_concurrent_model_calls
	// (with its Position), or for its provider's limits (Provider names it;
	// no position: the gateways keep no queue there). Limit names the limit
	// waited for (the Limit* values).
	EventQueued = "queued"
)

// Limits a queued event names (Event.Limit): a tenant's, or its provider's
// (herald.yaml's tenants.<t>.* and providers.<name>.*). LimitPause is a
// pause the provider asked for (a 429's Retry-After); LimitGatewayCap is
// one gateway process's own cap on calls to a provider (its --concurrency,
// halved by the provider's 429s until answers raise it again).
const (
	LimitSessions      = "max_concurrent_sessions"
	LimitModelCalls    = "max_concurrent_model_calls"
	LimitProviderCalls = "max_concurrent"
	LimitProviderRPM   = "rpm"
	LimitProviderTPM   = "tpm"
	LimitPause         = "retry_after"
	LimitGatewayCap    = "concurrency"
)

// Loop states carried by state events.
const (
	StateIdle          = "IDLE"
	StateThinking      = "THINKING"
	StateActing        = "ACTING"
	StateObserving     = "OBSERVING"
	StateErrorHandling = "ERROR_HANDLING"
	StateDone          = "DONE"
)

// Event is one progress message. Seq orders the events of one publisher within
// a session (the loop's state events share one counter; deltas count within a step).
type Event struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	TaskID    string `json:"task_id"`
	Seq       int64  `json:"seq"`
	TS        string `json:"ts"`

	State     string   `json:"state,omitempty"`
	Step      int      `json:"step,omitempty"`
	Delta     string   `json:"delta,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	CallID    string   `json:"call_id,omitempty"`
	Args      string   `json:"args,omitempty"`
	Status    string   `json:"status,omitempty"`
	Message   string   `json:"message,omitempty"`
	Attempt   int      `json:"attempt,omitempty"`
	Provider  string   `json:"provider,omitempty"`
	Model     string   `json:"model,omitempty"`
	Tokens    int64    `json:"tokens,omitempty"`
	Percent   int      `json:"percent,omitempty"`
	Choices   []string `json:"choices,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
	// Deadline (RFC 3339) of an approval or clarify prompt: until then the
	// server waits for an answer; then it decides without one.
	Deadline string  `json:"deadline,omitempty"`
	Result   *Result `json:"result,omitempty"`
	// File is the workspace file a warning is about.
	File string `json:"file,omitempty"`
	// Position is a queued task's place among its tenant's waiting ones.
	Position int `json:"position,omitempty"`
	// Limit names the limit a queued event waits for (the Limit* values).
	Limit string `json:"limit,omitempty"`
	// BoundTenant, set by publishers for a session bound to a tenant
	// (herald.tasks.<tenant>), also publishes the event on
	// herald.tenant.<tenant>.session.<sid>.events; it is not part of the JSON.
	BoundTenant string `json:"-"`
}

// Usage is the token breakdown of the public result.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// Result is the durable final result on herald.session.<sid>.result.
type Result struct {
	SessionID     string  `json:"session_id"`
	TaskID        string  `json:"task_id"`
	FinalResponse string  `json:"final_response"`
	ExitReason    string  `json:"exit_reason"`
	APICalls      int     `json:"api_calls"`
	Iterations    int     `json:"iterations"`
	Usage         Usage   `json:"usage"`
	CostUSD       float64 `json:"cost_usd"`
	// CostStatus says how much of CostUSD is known (CostExact, CostPartial,
	// CostUnknown); UnpricedModels names the models that had no price.
	CostStatus     string   `json:"cost_status,omitempty"`
	UnpricedModels []string `json:"unpriced_models,omitempty"`
	Error          string   `json:"error,omitempty"`
	// ContinuedAs names the session a compressed session continues under.
	ContinuedAs string `json:"continued_as,omitempty"`
}

// Exit reasons of DESIGN.md.
const (
	ExitTextResponse           = "text_response"
	ExitInterrupted            = "interrupted_by_user"
	ExitBudgetExhausted        = "budget_exhausted"
	ExitMaxIterations          = "max_iterations_reached"
	ExitAllRetriesExhausted    = "all_retries_exhausted"
	ExitEmptyResponseExhausted = "empty_response_exhausted"
	ExitErrorNearMaxIterations = "error_near_max_iterations"
	ExitTruncated              = "truncated"
	ExitRepeatDetected         = "repeat_detected"
	ExitInvalidToolCalls       = "invalid_tool_calls"
	ExitAuthFailed             = "auth_failed"
	ExitTimeout                = "timeout"
	ExitFailed                 = "failed"
)

// Input answers a clarify question or an approval prompt on herald.session.<sid>.input.
type Input struct {
	RequestID string `json:"request_id,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Answer    string `json:"answer,omitempty"`
	Approved  *bool  `json:"approved,omitempty"`
}

// Interrupt stops a session's current turn (herald.session.<sid>.interrupt); the body may be empty.
// With TaskID it stops only that task's turn, also when it arrives before the
// turn began (the task still waiting): the task then ends interrupted as it starts.
type Interrupt struct {
	Reason string `json:"reason,omitempty"`
	TaskID string `json:"task_id,omitempty"`
}
