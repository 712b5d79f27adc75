package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
)

// Session statuses.
const (
	statusIdle        = "idle"
	statusThinking    = "thinking"
	statusActing      = "acting"
	statusCompressing = "compressing"
)

// Pending kinds: what a session waits for.
const (
	waitLLM      = "llm"
	waitTools    = "tools"
	waitCompress = "compress"
)

// PendingCall is one tool call of the current step.
type PendingCall struct {
	CallID  string `json:"call_id"`  // internal, subject-safe id
	ModelID string `json:"model_id"` // the id the model gave the call
	Tool    string `json:"tool"`
	Args    string `json:"args"`
	Segment int    `json:"segment"`
	Done    bool   `json:"done"`
	// Result holds the answer of a call the loop answered itself.
	Result string `json:"result,omitempty"`
	// Local calls are answered by the loop itself (unknown tool, bad JSON).
	Local bool `json:"local,omitempty"`
	// ResultSeq is where, in TOOL_RESULTS, the accepted answer of a
	// delegate_task call is: it is read from there, so a later message on
	// the same subject cannot replace it.
	ResultSeq uint64 `json:"result_seq,omitempty"`
}

// Pending is what the session waits for before it can advance.
type Pending struct {
	Kind      string        `json:"kind"`
	RequestID string        `json:"request_id,omitempty"`
	Calls     []PendingCall `json:"calls,omitempty"`
	Segment   int           `json:"segment,omitempty"`
	// Resume is the model request (requestKind) a compression holds back.
	Resume int    `json:"resume,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Scaffold is the retry scaffolding sent with the pending model call; it
	// is re-sent on redelivery but never persisted in the transcript.
	Scaffold []scaffoldMsg `json:"scaffold,omitempty"`
	Grace    bool          `json:"grace,omitempty"`
}

type scaffoldMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// State is the small per-session record in the herald_sessions bucket.
type State struct {
	SessionID string `json:"session_id"`
	TaskID    string `json:"task_id"`
	Tenant    string `json:"tenant"`
	// BoundTenant is set for a session its task's subject bound to a tenant
	// (herald.tasks.<tenant>).
	BoundTenant string `json:"bound_tenant,omitempty"`
	// SlotTenant is the tenant whose max_concurrent_sessions slot the
	// turn holds, released when it ends (admit.go).
	SlotTenant      string `json:"slot_tenant,omitempty"`
	Model           string `json:"model"`
	Pool            string `json:"pool"`
	Workspace       string `json:"workspace,omitempty"`
	ParentSessionID string `json:"parent_session_id,omitempty"`
	// APIKeyID and ScheduleID: the API key and schedule whose budgets the
	// turn's model calls are charged to (the task's, from the api service).
	APIKeyID   string `json:"api_key_id,omitempty"`
	ScheduleID string `json:"schedule_id,omitempty"`
	Status     string `json:"status"`
	Turn       int    `json:"turn"`
	Step       int    `json:"step"`
	// Refunds are iterations given back by cheap-only steps this turn.
	Refunds       int `json:"refunds,omitempty"`
	MaxIterations int `json:"max_iterations"`
	TranscriptLen int `json:"transcript_len"`
	// LogChain is the chain hash through the current log's last committed
	// entry (see TranscriptEntry.chain).
	LogChain       uint64      `json:"log_chain,omitempty"`
	Pending        *Pending    `json:"pending,omitempty"`
	APICalls       int         `json:"api_calls"`
	Usage          proto.Usage `json:"usage"`
	CostUSD        float64     `json:"cost_usd"`
	SessionCostUSD float64     `json:"session_cost_usd"`
	// Pricing counts the turn's model calls by whether their model had a
	// price; SessionUnpriced counts the session's unpriced calls, so a
	// session's cost so far is known to be a lower bound.
	Pricing         TurnPricing `json:"pricing,omitzero"`
	SessionUnpriced int         `json:"session_unpriced_calls,omitempty"`
	// Title is the session's first prompt, cut (sessions list); LastExit
	// the exit reason of its last finished turn.
	Title         string   `json:"title,omitempty"`
	LastExit      string   `json:"last_exit,omitempty"`
	MaxCostUSD    float64  `json:"max_cost_usd,omitempty"`
	EventSeq      int64    `json:"event_seq"`
	Yes           bool     `json:"yes,omitempty"`
	TurnStartedMs int64    `json:"turn_started_ms"`
	Toolsets      []string `json:"toolsets,omitempty"`

	// ReasoningEffort is the task's reasoning_effort ("": herald.yaml's).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`

	ParentCallID string `json:"parent_call_id,omitempty"`
	// Recall is this turn's recalled memory, already fenced; it is added to
	// the turn's user message at call time and never persisted.
	Recall         string `json:"recall,omitempty"`
	Attempt        int    `json:"attempt"`
	PreferFallback bool   `json:"prefer_fallback,omitempty"`
	GraceReason    string `json:"grace_reason,omitempty"`

	// Retry and repair counters of the current turn.
	EmptyRetries     int    `json:"empty_retries,omitempty"`
	ThinkingRetries  int    `json:"thinking_retries,omitempty"`
	NudgedAfterTools bool   `json:"nudged_after_tools,omitempty"`
	InvalidStrikes   int    `json:"invalid_strikes,omitempty"`
	LastFingerprint  string `json:"last_fingerprint,omitempty"`
	RepeatCount      int    `json:"repeat_count,omitempty"`
	Continuations    int    `json:"continuations,omitempty"`
	PartialContent   string `json:"partial_content,omitempty"`
	LastPressureMs   int64  `json:"last_pressure_ms,omitempty"`
	LastPressurePct  int    `json:"last_pressure_pct,omitempty"`
	PromptTokens     int64  `json:"prompt_tokens,omitempty"`
	Compressions     int    `json:"compressions,omitempty"`
	WeakCompressions int    `json:"weak_compressions,omitempty"`
	NoCompress       bool   `json:"no_compress,omitempty"`
	CompressAttempts int    `json:"compress_attempts,omitempty"`
	// LastSaving is the share of tokens the last compression saved.
	LastSaving float64 `json:"last_saving,omitempty"`
	// OverflowCompressions counts compressions forced by overflow errors on
	// the current model call.
	OverflowCompressions int `json:"overflow_compressions,omitempty"`
	// LogSID is the log holding the current transcript after a compression
	// (<sid>-c<n>); Logs are the earlier ones, oldest first.
	LogSID string   `json:"log_sid,omitempty"`
	Logs   []string `json:"logs,omitempty"`
	// SentRef is how much of the transcript the last model request covered:
	// the next request carries only the entries after it (see ref.go).
	SentRef *SentRef `json:"sent_ref,omitempty"`
	// Trace is the current turn's span as a W3C traceparent, TraceParent
	// the span id it hangs under (see telemetry.NewTurn); empty when the
	// turn's loop exported no traces.
	Trace       string `json:"trace,omitempty"`
	TraceParent string `json:"trace_parent,omitempty"`
}

// resetTurnCounters clears what one turn's retries and repairs counted.
func (s *State) resetTurnCounters() {
	s.Pricing = TurnPricing{}
	s.EmptyRetries, s.ThinkingRetries, s.NudgedAfterTools = 0, 0, false
	s.InvalidStrikes, s.LastFingerprint, s.RepeatCount = 0, "", 0
	s.Continuations, s.PartialContent, s.PreferFallback, s.GraceReason = 0, "", false, ""
}

// active reports whether a turn is in progress.
func (s *State) active() bool { return s.Status != "" && s.Status != statusIdle }

// sessionStore reads and commits session state with compare-and-set.
type sessionStore struct{ kv jetstream.KeyValue }

// errConflict means another handler advanced the session first; the message
// is redelivered and handled against the new state.
var errConflict = errors.New("session state changed concurrently")

// record is a session's state as stored at a revision (0 and no data: none).
type record struct {
	data []byte
	rev  uint64
}

// decode returns the state the record holds, or nil for none.
func (r record) decode(sid string) (*State, error) {
	if r.data == nil {
		return nil, nil
	}
	var st State
	if err := json.Unmarshal(r.data, &st); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", sid, err)
	}
	return &st, nil
}

// same reports whether o is this very record: the revision alone could
// repeat on a bucket created anew.
func (r record) same(o record) bool { return r.rev == o.rev && bytes.Equal(r.data, o.data) }

// fetched is the outcome of a read started by fetch.
type fetched struct {
	rec record
	err error
}

// fetch reads the session's record without waiting for it.
func (s sessionStore) fetch(ctx context.Context, sid string) <-chan fetched {
	out := make(chan fetched, 1)
	go func() {
		rec, err := s.get(ctx, sid)
		out <- fetched{rec: rec, err: err}
	}()
	return out
}

// load returns the session's state, or nil when it has none.
func (s sessionStore) load(ctx context.Context, sid string) (*State, error) {
	rec, err := s.get(ctx, sid)
	if err != nil {
		return nil, err
	}
	return rec.decode(sid)
}

func (s sessionStore) get(ctx context.Context, sid string) (record, error) {
	e, err := s.kv.Get(ctx, sid)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return record{}, nil
	}
	if err != nil {
		return record{}, fmt.Errorf("load session %s: %w", sid, err)
	}
	return record{data: e.Value(), rev: e.Revision()}, nil
}

// commitRecord stores data as the session's record if it is still at rev
// (0: must not exist yet) and returns the record stored.
func (s sessionStore) commitRecord(ctx context.Context, sid string, data []byte, rev uint64) (record, error) {
	var newRev uint64
	var err error
	if rev == 0 {
		newRev, err = s.kv.Create(ctx, sid, data)
	} else {
		newRev, err = s.kv.Update(ctx, sid, data, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
		return record{}, errConflict
	}
	if err != nil {
		return record{}, fmt.Errorf("commit session %s: %w", sid, err)
	}
	return record{data: data, rev: newRev}, nil
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
