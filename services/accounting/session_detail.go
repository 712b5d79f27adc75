package accounting

import (
	"context"
	"errors"
	"sort"
	"time"
)

// ErrNoSession: no usage was recorded for the session.
var ErrNoSession = errors.New("no usage recorded for this session")

// SessionDetail is one session's model calls and tool executions in order,
// its subagents' (delegate_task children) included.
type SessionDetail struct {
	SessionID string `json:"session_id"`
	Tenant    string `json:"tenant"`
	// Subagents are the child sessions whose steps and tools are included.
	Subagents []string    `json:"subagent_sessions"`
	Total     CostRow     `json:"total"`
	Steps     []Step      `json:"steps"`
	Tools     []ToolEntry `json:"tools"`
	// TopResults are the tool results that cost most in context (carried
	// in the model calls that followed them), costliest first.
	TopResults []ResultCost `json:"top_tool_results"`
}

// Step is one provider attempt of the session.
type Step struct {
	EventID          string    `json:"event_id"`
	SessionID        string    `json:"session_id"`
	TS               time.Time `json:"ts"`
	TaskID           string    `json:"task_id"`
	Purpose          string    `json:"purpose"`
	Provider         string    `json:"provider"`
	Model            string    `json:"model"`
	Attempt          uint16    `json:"attempt"`
	Fallback         bool      `json:"is_fallback"`
	Status           string    `json:"status"`
	ErrorClass       string    `json:"error_class,omitempty"`
	ErrorMessage     string    `json:"error_message,omitempty"` // what the provider said, redacted
	InputTokens      uint64    `json:"input_tokens"`
	OutputTokens     uint64    `json:"output_tokens"`
	CacheReadTokens  uint64    `json:"cache_read_tokens"`
	CacheWriteTokens uint64    `json:"cache_write_tokens"`
	ReasoningTokens  uint64    `json:"reasoning_tokens"`
	CostNanoUSD      uint64    `json:"cost_nano_usd"`
	CostUSD          float64   `json:"cost_usd"`
	LatencyMs        uint32    `json:"latency_ms"`
}

// ToolEntry is one tool execution of the session.
type ToolEntry struct {
	TS         time.Time `json:"ts"`
	SessionID  string    `json:"session_id"`
	CallID     string    `json:"call_id"`
	Tool       string    `json:"tool"`
	Runner     string    `json:"runner"`
	Status     string    `json:"status"`
	DurationMs uint32    `json:"duration_ms"`
	OutputSize uint64    `json:"output_bytes"`
}

// maxSteps bounds a session page.
const maxSteps = 2000

// sessionDetail finds the session's and its subagents' tenant and hours in
// the per-session roll-up, then reads just that slice of the raw tables.
func (s *store) sessionDetail(ctx context.Context, sessionID string) (SessionDetail, error) {
	d := SessionDetail{SessionID: sessionID, Subagents: []string{}, Steps: []Step{}, Tools: []ToolEntry{}, TopResults: []ResultCost{}}
	f, err := s.sessionFamily(ctx, sessionID)
	if err != nil {
		return d, err
	}
	if len(f.spans) == 0 {
		return d, ErrNoSession
	}
	d.Tenant = f.spans[0].tenant
	d.Subagents = append(d.Subagents, f.subagents...)
	for _, sp := range f.spans {
		steps, err := s.sessionSteps(ctx, sp, f.sessions())
		if err != nil {
			return d, err
		}
		tools, err := s.sessionTools(ctx, sp, f.sessions())
		if err != nil {
			return d, err
		}
		d.Steps, d.Tools = append(d.Steps, steps...), append(d.Tools, tools...)
	}
	if d.TopResults, err = s.familyTopResults(ctx, f, d.Tools); err != nil {
		return d, err
	}
	for _, st := range d.Steps {
		d.Total.add(CostRow{Calls: 1, Errors: boolCount(st.Status != "ok"), InputTokens: st.InputTokens,
			OutputTokens: st.OutputTokens, CacheReadTokens: st.CacheReadTokens, CacheWriteTokens: st.CacheWriteTokens,
			ReasoningTokens: st.ReasoningTokens, CostNanoUSD: st.CostNanoUSD, LatencyMs: uint64(st.LatencyMs)})
	}
	d.Total.Key, d.Total.CostUSD = "total", nanoToUSD(d.Total.CostNanoUSD)
	sort.SliceStable(d.Steps, func(i, j int) bool { return d.Steps[i].TS.Before(d.Steps[j].TS) })
	sort.SliceStable(d.Tools, func(i, j int) bool { return d.Tools[i].TS.Before(d.Tools[j].TS) })
	return d, nil
}

// sessionSpan is where a session's raw rows are: a tenant and an hour range.
type sessionSpan struct {
	tenant   string
	from, to uint32
}

func (s *store) sessionSteps(ctx context.Context, sp sessionSpan, sessions []string) ([]Step, error) {
	in, ids := sessionIn(sessions)
	args := append(append([]any{sp.tenant, sp.from, sp.to}, ids...), maxSteps)
	rows, err := s.conn.Query(ctx, "SELECT event_id, session_id, ts, task_id, purpose, provider, model, attempt, is_fallback, status, "+
		"error_class, error_message, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_nano_usd, "+
		"latency_ms FROM usage_events WHERE tenant = ? AND ts >= toDateTime(?) AND ts < toDateTime(?) "+
		"AND "+in+" ORDER BY ts, event_id LIMIT ?", args...)
	if err != nil {
		return nil, s.queryError(err)
	}
	defer rows.Close()
	out := []Step{}
	for rows.Next() {
		var st Step
		var fallback uint8
		if err := rows.Scan(&st.EventID, &st.SessionID, &st.TS, &st.TaskID, &st.Purpose, &st.Provider, &st.Model, &st.Attempt, &fallback,
			&st.Status, &st.ErrorClass, &st.ErrorMessage, &st.InputTokens, &st.OutputTokens, &st.CacheReadTokens, &st.CacheWriteTokens,
			&st.ReasoningTokens, &st.CostNanoUSD, &st.LatencyMs); err != nil {
			return nil, err
		}
		st.Fallback, st.CostUSD, st.TS = fallback == 1, nanoToUSD(st.CostNanoUSD), st.TS.UTC()
		out = append(out, st)
	}
	if err := s.queryError(rows.Err()); err != nil {
		return nil, err
	}
	return out, s.correctSteps(ctx, sp, sessions, out)
}

// correctSteps gives each step its corrected cost where `herald cost
// reprice` corrected its row (usage_corrections, 007).
func (s *store) correctSteps(ctx context.Context, sp sessionSpan, sessions []string, steps []Step) error {
	in, ids := sessionIn(sessions)
	args := append([]any{sp.tenant, sp.from, sp.to}, ids...)
	rows, err := s.conn.Query(ctx, "SELECT event_id, argMax(cost_after_nano_usd, seq) FROM usage_corrections "+
		"WHERE tenant = ? AND ts >= toDateTime(?) AND ts < toDateTime(?) AND "+in+" GROUP BY event_id", args...)
	if err != nil {
		return s.queryError(err)
	}
	defer rows.Close()
	corrected := map[string]uint64{}
	for rows.Next() {
		var id string
		var nano uint64
		if err := rows.Scan(&id, &nano); err != nil {
			return err
		}
		corrected[id] = nano
	}
	for i := range steps {
		if nano, ok := corrected[steps[i].EventID]; ok {
			steps[i].CostNanoUSD, steps[i].CostUSD = nano, nanoToUSD(nano)
		}
	}
	return s.queryError(rows.Err())
}

func (s *store) sessionTools(ctx context.Context, sp sessionSpan, sessions []string) ([]ToolEntry, error) {
	in, ids := sessionIn(sessions)
	args := append(append([]any{sp.tenant, sp.from, sp.to}, ids...), maxSteps)
	rows, err := s.conn.Query(ctx, "SELECT ts, session_id, call_id, tool, runner, status, duration_ms, output_bytes FROM tool_events "+
		"WHERE tenant = ? AND ts >= toDateTime(?) AND ts < toDateTime(?) AND "+in+" ORDER BY ts, event_id LIMIT ?", args...)
	if err != nil {
		return nil, s.queryError(err)
	}
	defer rows.Close()
	out := []ToolEntry{}
	for rows.Next() {
		var e ToolEntry
		if err := rows.Scan(&e.TS, &e.SessionID, &e.CallID, &e.Tool, &e.Runner, &e.Status, &e.DurationMs, &e.OutputSize); err != nil {
			return nil, err
		}
		e.TS = e.TS.UTC()
		out = append(out, e)
	}
	return out, s.queryError(rows.Err())
}

func boolCount(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
