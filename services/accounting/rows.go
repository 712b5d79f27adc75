package accounting

import (
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"time"
	"unicode/utf8"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// row is one decoded event ready for its table.
type row struct {
	id string
	ev proto.Message
}

// eventKind is one stream the sink drains into one table.
type eventKind struct {
	stream  string
	durable string
	filter  string
	table   string
	idTable string // materialized view of stored ids, ordered by id
	columns []string
	decode  func(data []byte) (row, error)
	// toColumns lays rows out as one typed slice per column, in columns'
	// order: appending whole columns avoids boxing every value.
	toColumns func(rows []row) []any
	// companion, when set, is a table of rows derived from each event,
	// stored before the events themselves (so an event found stored has
	// its derived rows too).
	companion *derivedKind
}

var usageKind = eventKind{
	stream:  bus.StreamUsage,
	durable: "accounting-usage",
	filter:  "herald.usage.>",
	table:   "usage_events",
	idTable: "usage_event_ids",
	columns: []string{"event_id", "ts", "tenant", "session_id", "parent_session_id", "task_id", "purpose",
		"provider", "model", "api_mode", "input_tokens", "output_tokens", "cache_read_tokens",
		"cache_write_tokens", "reasoning_tokens", "cost_nano_usd", "price_source", "latency_ms",
		"status", "error_class", "error_message", "attempt", "is_fallback"},
	decode:    decodeUsage,
	toColumns: usageColumns,
	companion: &carriedKind,
}

var toolKind = eventKind{
	stream:  bus.StreamToolEvents,
	durable: "accounting-tools",
	filter:  "herald.toolevents.>",
	table:   "tool_events",
	idTable: "tool_event_ids",
	columns: []string{"event_id", "ts", "tenant", "session_id", "task_id", "call_id", "tool", "runner",
		"duration_ms", "status", "output_bytes"},
	decode:    decodeTool,
	toColumns: toolColumns,
}

var errNoEventID = errors.New("event has no event_id")

func decodeUsage(data []byte) (row, error) {
	e := &heraldpb.UsageEvent{}
	if err := bus.Decode(data, e); err != nil {
		return row{}, err
	}
	if e.GetEventId() == "" {
		return row{}, bus.Permanent(fmt.Errorf("malformed usage event: %w", errNoEventID))
	}
	if err := checkTime(e.GetTsUnixMs()); err != nil {
		return row{}, bus.Permanent(fmt.Errorf("malformed usage event %s: %w", e.GetEventId(), err))
	}
	return row{id: e.GetEventId(), ev: e}, nil
}

func usageColumns(rows []row) []any {
	n := len(rows)
	var (
		ids, tenant, session, parent, task, purpose     = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		provider, model, mode, source, status, class    = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		message                                         = make([]string, n)
		in, out, cacheRead, cacheWrite, reasoning, cost = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		ts                                              = make([]time.Time, n)
		latency                                         = make([]uint32, n)
		attempt                                         = make([]uint16, n)
		fallback                                        = make([]uint8, n)
	)
	for i, r := range rows {
		e := r.ev.(*heraldpb.UsageEvent)
		u := e.GetUsage()
		ids[i], ts[i], tenant[i], session[i] = r.id, eventTime(e.GetTsUnixMs()), orDefault(e.GetTenant()), e.GetSessionId()
		parent[i], task[i], purpose[i] = e.GetParentSessionId(), e.GetTaskId(), orDefault(e.GetPurpose())
		provider[i], model[i], mode[i] = e.GetProvider(), e.GetModel(), e.GetApiMode()
		in[i], out[i], cacheRead[i] = count(u.GetInputTokens()), count(u.GetOutputTokens()), count(u.GetCacheReadTokens())
		cacheWrite[i], reasoning[i], cost[i] = count(u.GetCacheWriteTokens()), count(u.GetReasoningTokens()), e.GetCostNanoUsd()
		source[i], latency[i], status[i] = e.GetPriceSource(), uint32(clamp(e.GetLatencyMs(), 1<<32-1)), orOK(e.GetStatus())
		class[i], attempt[i], fallback[i] = e.GetErrorClass(), uint16(clamp(int64(e.GetAttempt()), 1<<16-1)), boolByte(e.GetIsFallback())
		message[i] = errorMessage(e.GetErrorMessage())
	}
	return []any{ids, ts, tenant, session, parent, task, purpose, provider, model, mode, in, out, cacheRead,
		cacheWrite, reasoning, cost, source, latency, status, class, message, attempt, fallback}
}

// maxErrorMessage bounds a stored error message: the gateway already cuts it
// to 500 bytes; an event from elsewhere is cut here on a character boundary.
const maxErrorMessage = 500

func errorMessage(s string) string {
	if len(s) <= maxErrorMessage {
		return s
	}
	n := maxErrorMessage
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func decodeTool(data []byte) (row, error) {
	e := &heraldpb.ToolEvent{}
	if err := bus.Decode(data, e); err != nil {
		return row{}, err
	}
	id := e.GetEventId()
	if id == "" && e.GetCallId() != "" {
		// Call ids repeat across sessions; only with the session are they one execution.
		id = e.GetSessionId() + ":" + e.GetCallId()
	}
	if id == "" {
		return row{}, bus.Permanent(fmt.Errorf("malformed tool event: %w", errNoEventID))
	}
	if err := checkTime(e.GetTsUnixMs()); err != nil {
		return row{}, bus.Permanent(fmt.Errorf("malformed tool event %s: %w", id, err))
	}
	return row{id: id, ev: e}, nil
}

func toolColumns(rows []row) []any {
	n := len(rows)
	var (
		ids, tenant, session, task, call, tool, runner, status = make([]string, n), make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ts       = make([]time.Time, n)
		duration = make([]uint32, n)
		size     = make([]uint64, n)
	)
	for i, r := range rows {
		e := r.ev.(*heraldpb.ToolEvent)
		ids[i], ts[i], tenant[i], session[i], task[i] = r.id, eventTime(e.GetTsUnixMs()), orDefault(e.GetTenant()), e.GetSessionId(), e.GetTaskId()
		call[i], tool[i], runner[i] = e.GetCallId(), e.GetTool(), e.GetRunner()
		duration[i], status[i], size[i] = uint32(clamp(e.GetDurationMs(), 1<<32-1)), orOK(e.GetStatus()), count(e.GetOutputBytes())
	}
	return []any{ids, ts, tenant, session, task, call, tool, runner, duration, status, size}
}

// maxEventMs is the last instant a DateTime column holds (2106-02-07).
const maxEventMs = (1<<32 - 1) * 1000

// checkTime refuses a time ClickHouse cannot store: one such row would make
// every insert of its batch fail, holding the whole stream up.
func checkTime(ms int64) error {
	if ms > maxEventMs {
		return fmt.Errorf("ts_unix_ms %d is past what ClickHouse's DateTime holds", ms)
	}
	return nil
}

// eventTime is the event's time in whole seconds (the DateTime grain);
// an event without one is stamped now.
func eventTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Now().UTC().Truncate(time.Second)
	}
	return time.UnixMilli(ms).UTC().Truncate(time.Second)
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}

func count(n int64) uint64 { return uint64(max(n, 0)) }

func clamp(n, hi int64) int64 { return min(max(n, 0), hi) }

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
