package accounting

import (
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// row is one decoded event ready for its table.
type row struct {
	id     string
	values []any
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
		"status", "error_class", "attempt", "is_fallback"},
	decode: decodeUsage,
}

var toolKind = eventKind{
	stream:  bus.StreamToolEvents,
	durable: "accounting-tools",
	filter:  "herald.toolevents.>",
	table:   "tool_events",
	idTable: "tool_event_ids",
	columns: []string{"event_id", "ts", "tenant", "session_id", "task_id", "call_id", "tool", "runner",
		"duration_ms", "status", "output_bytes"},
	decode: decodeTool,
}

var errNoEventID = errors.New("event has no event_id")

func decodeUsage(data []byte) (row, error) {
	var e heraldpb.UsageEvent
	if err := bus.Decode(data, &e); err != nil {
		return row{}, err
	}
	if e.GetEventId() == "" {
		return row{}, bus.Permanent(fmt.Errorf("malformed usage event: %w", errNoEventID))
	}
	u := e.GetUsage()
	return row{id: e.GetEventId(), values: []any{
		e.GetEventId(), eventTime(e.GetTsUnixMs()), orDefault(e.GetTenant()), e.GetSessionId(),
		e.GetParentSessionId(), e.GetTaskId(), orDefault(e.GetPurpose()), e.GetProvider(), e.GetModel(),
		e.GetApiMode(), count(u.GetInputTokens()), count(u.GetOutputTokens()),
		count(u.GetCacheReadTokens()), count(u.GetCacheWriteTokens()), count(u.GetReasoningTokens()),
		e.GetCostNanoUsd(), e.GetPriceSource(), uint32(clamp(e.GetLatencyMs(), 1<<32-1)),
		orOK(e.GetStatus()), e.GetErrorClass(), uint16(clamp(int64(e.GetAttempt()), 1<<16-1)),
		boolByte(e.GetIsFallback()),
	}}, nil
}

func decodeTool(data []byte) (row, error) {
	var e heraldpb.ToolEvent
	if err := bus.Decode(data, &e); err != nil {
		return row{}, err
	}
	id := e.GetEventId()
	if id == "" {
		id = e.GetCallId()
	}
	if id == "" {
		return row{}, bus.Permanent(fmt.Errorf("malformed tool event: %w", errNoEventID))
	}
	return row{id: id, values: []any{
		id, eventTime(e.GetTsUnixMs()), orDefault(e.GetTenant()), e.GetSessionId(), e.GetTaskId(),
		e.GetCallId(), e.GetTool(), e.GetRunner(), uint32(clamp(e.GetDurationMs(), 1<<32-1)),
		orOK(e.GetStatus()), count(e.GetOutputBytes()),
	}}, nil
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
