package accounting

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// Transcripts reads a session's committed transcript. The dashboard does
// not reach the bus itself: the herald binary, which runs the loop too,
// hands it this reader (see SetTranscripts).
type Transcripts func(ctx context.Context, sessionID string) ([]*heraldpb.TranscriptEntry, error)

// SessionTrace is one session as a trace: per turn, the timeline of its
// model attempts and tool runs, with the messages and tool arguments and
// results they carried when the transcript is readable.
type SessionTrace struct {
	SessionID string    `json:"session_id"`
	Tenant    string    `json:"tenant"`
	Start     time.Time `json:"start"`
	// DurationMs is the waterfall's length: the steps' attempts and tool
	// calls, without the time between them (see buildTrace).
	DurationMs  int64       `json:"duration_ms"`
	CostNanoUSD uint64      `json:"cost_nano_usd"`
	Turns       []TraceTurn `json:"turns"`
	// Transcript says why messages are missing ("" when they are shown).
	Transcript string `json:"transcript_unavailable,omitempty"`
}

// TraceTurn is one turn: the user's prompt and what answered it.
type TraceTurn struct {
	Turn        int         `json:"turn"`
	Prompt      *Excerpt    `json:"prompt,omitempty"`
	CostNanoUSD uint64      `json:"cost_nano_usd"`
	Spans       []TraceSpan `json:"spans"`
}

// TraceSpan is one model attempt (Kind "model") or tool run ("tool"),
// placed on the session's timeline.
type TraceSpan struct {
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	Start      time.Time `json:"start"`
	OffsetMs   int64     `json:"offset_ms"`
	DurationMs int64     `json:"duration_ms"`
	Step       int       `json:"step"`
	Status     string    `json:"status"`
	ErrorClass string    `json:"error_class,omitempty"`
	// ErrorMessage is what the provider said of a failed attempt (redacted).
	ErrorMessage string `json:"error_message,omitempty"`
	// Model attempts.
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	Purpose      string `json:"purpose,omitempty"`
	Attempt      uint16 `json:"attempt,omitempty"`
	Retry        bool   `json:"retry,omitempty"`    // after a failed attempt, same model
	Fallback     bool   `json:"fallback,omitempty"` // after a failed attempt, another model
	OnFallback   bool   `json:"on_fallback,omitempty"`
	InputTokens  uint64 `json:"input_tokens,omitempty"`
	CachedTokens uint64 `json:"cached_tokens,omitempty"`
	OutputTokens uint64 `json:"output_tokens,omitempty"`
	CostNanoUSD  uint64 `json:"cost_nano_usd"`
	// Output is the step's answer, on the attempt that gave it.
	Output *Excerpt `json:"output,omitempty"`
	// Tool runs.
	Tool      string   `json:"tool,omitempty"`
	CallID    string   `json:"call_id,omitempty"`
	Runner    string   `json:"runner,omitempty"`
	Arguments *Excerpt `json:"arguments,omitempty"`
	Result    *Excerpt `json:"result,omitempty"`
	// LeftPct and WidthPct place the span on the timeline.
	LeftPct  float64 `json:"-"`
	WidthPct float64 `json:"-"`
	// Subagent is the delegated child session a span belongs to ("" for
	// the session's own).
	Subagent string `json:"subagent,omitempty"`
	turn     int
	sub      stepKey // the child's own turn and step
	seq      int     // attempt number, or the call's index in its step
}

// Excerpt is a text shown cut to Short, with the whole (up to a bound)
// behind an expander when Cut.
type Excerpt struct {
	Short string `json:"short"`
	Full  string `json:"full"`
	Cut   bool   `json:"cut"`
}

// maxTraceSubagents bounds the child transcripts one trace page reads.
const maxTraceSubagents = 20

// minBar is the narrowest bar on the timeline, in percent of its width.
const minBar = 0.8

const (
	excerptShort = 240
	excerptFull  = 20_000
)

func excerpt(s string) *Excerpt {
	if s == "" {
		return nil
	}
	e := &Excerpt{Short: cut(s, excerptShort), Full: cut(s, excerptFull)}
	e.Cut = e.Short != s
	return e
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// SetTranscripts lets the session trace show messages, tool arguments and
// results.
func (d *Dashboard) SetTranscripts(t Transcripts) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.transcripts = t
}

func (d *Dashboard) routeTrace() {
	d.mux.HandleFunc("GET /sessions/{id}/trace", d.page(d.tracePage))
	d.mux.HandleFunc("GET /api/sessions/{id}/trace", d.api(d.traceAPI))
}

func (d *Dashboard) traceAPI(ctx context.Context, st *store, r *http.Request) (any, error) {
	return d.sessionTrace(ctx, st, r.PathValue("id"))
}

func (d *Dashboard) tracePage(ctx context.Context, st *store, r *http.Request) (any, error) {
	tr, err := d.sessionTrace(ctx, st, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return pageData{template: "trace", Title: "Session " + tr.SessionID + " · trace", Trace: tr, Back: "../" + url.PathEscape(tr.SessionID)}, nil
}

func (d *Dashboard) sessionTrace(ctx context.Context, st *store, sid string) (SessionTrace, error) {
	det, err := st.sessionDetail(ctx, sid)
	if err != nil {
		return SessionTrace{}, err
	}
	d.mu.Lock()
	read := d.transcripts
	d.mu.Unlock()
	why := "the transcript is read only where the dashboard runs with the loop (herald up)"
	transcripts := map[string][]*heraldpb.TranscriptEntry{}
	if read != nil {
		why = ""
		sessions := append([]string{sid}, det.Subagents[:min(len(det.Subagents), maxTraceSubagents)]...)
		for _, s := range sessions {
			entries, err := read(ctx, s)
			if err != nil && why == "" {
				why = "transcript unavailable: " + err.Error()
			}
			transcripts[s] = entries
		}
	}
	tr := buildTrace(det, transcripts)
	tr.Transcript = why
	return tr, nil
}

// stepKey names a step of a turn.
type stepKey struct{ turn, step int }

// buildTrace lays the session's attempts and tool runs on one timeline and
// groups them by turn. Attempts are tied to their turn and step by their
// event id (<session>:<turn>:<step>:<attempt>:<n>), tool runs by their call
// id (t<turn>s<step>c<index>); the transcript's k-th assistant message of a
// turn is its step k's answer.
//
// The tables keep whole seconds (ClickHouse 18.16 has no DateTime64), too
// coarse to order calls a few milliseconds apart, so the timeline is a
// waterfall in the loop's own order: each step's attempts one after the
// other, then its tool calls side by side (as they are dispatched),
// each as long as it took; the time between steps is not shown.
func buildTrace(det SessionDetail, transcripts map[string][]*heraldpb.TranscriptEntry) SessionTrace {
	tr := SessionTrace{SessionID: det.SessionID, Tenant: det.Tenant, CostNanoUSD: det.Total.CostNanoUSD}
	msgs := map[string]transcriptIndex{}
	for sid, entries := range transcripts {
		msgs[sid] = indexTranscript(entries)
	}
	var spans []TraceSpan
	for _, s := range det.Steps {
		sp := TraceSpan{Kind: "model", Name: "chat " + s.Model, Start: s.TS,
			DurationMs: int64(s.LatencyMs), Status: s.Status, ErrorClass: s.ErrorClass, ErrorMessage: s.ErrorMessage, Provider: s.Provider,
			Model: s.Model, Purpose: s.Purpose, Attempt: s.Attempt, OnFallback: s.Fallback,
			InputTokens: s.InputTokens + s.CacheReadTokens + s.CacheWriteTokens, CachedTokens: s.CacheReadTokens,
			OutputTokens: s.OutputTokens, CostNanoUSD: s.CostNanoUSD, seq: int(s.Attempt)}
		turn, step := stepOfEvent(sessionOf(s.SessionID, det.SessionID), s.EventID)
		spans = append(spans, locate(sp, det.SessionID, sessionOf(s.SessionID, det.SessionID), turn, step))
	}
	for _, e := range det.Tools {
		sid := sessionOf(e.SessionID, det.SessionID)
		turn, step, index := stepOfCall(e.CallID)
		sp := TraceSpan{Kind: "tool", Name: "execute_tool " + e.Tool, Start: e.TS, DurationMs: int64(e.DurationMs),
			Status: e.Status, Tool: e.Tool, CallID: e.CallID, Runner: e.Runner, seq: index}
		if m := msgs[sid].answers[stepKey{turn, step}]; m != nil && index >= 0 && index < len(m.GetToolCalls()) {
			call := m.GetToolCalls()[index]
			sp.Arguments = excerpt(call.GetArguments())
			sp.Result = excerpt(msgs[sid].results[call.GetId()])
		}
		spans = append(spans, locate(sp, det.SessionID, sid, turn, step))
	}
	sort.SliceStable(spans, func(i, j int) bool { return loopOrder(spans[i], spans[j]) })
	markAttempts(spans, msgs, det.SessionID)
	tr.Turns = groupTurns(spans, msgs[det.SessionID].prompts)
	place(&tr)
	return tr
}

func sessionOf(rowSession, session string) string {
	if rowSession == "" {
		return session
	}
	return rowSession
}

// locate places a span of session sid at its step: the session's own turn
// and step, or, for a delegated child (session <parent>-<call id>), the
// parent's step that delegated, with the child's own turn and step kept.
func locate(sp TraceSpan, parent, sid string, turn, step int) TraceSpan {
	if sid == parent {
		sp.turn, sp.Step = turn, step
		return sp
	}
	sp.Subagent, sp.sub = sid, stepKey{turn, step}
	if call, ok := strings.CutPrefix(sid, parent+"-"); ok {
		if pt, ps, _ := stepOfCall(call); pt > 0 {
			sp.turn, sp.Step = pt, ps
		}
	}
	return sp
}

// dict builds a template argument from key, value pairs.
func dict(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		m[k] = kv[i+1]
	}
	return m
}
