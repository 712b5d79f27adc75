package bus

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/heraldrun/herald/proto"
)

// Public subjects (DESIGN.md).
const (
	TasksSubject = "herald.tasks"
	dlqPrefix    = "herald.dlq."
)

// Internal request/reply subjects.
const (
	MemorySnapshotSubject = "herald.memory.snapshot"
	// MemoryRecallSubject answers {"tenant","query"} with fenced recalled memory.
	MemoryRecallSubject = "herald.memory.recall"
	ToolSpecsSubject    = "herald.tools.specs"
)

// Plugin hooks (DESIGN.md contract additions): events and request/reply
// subjects a plugin in any language answers as a plain NATS client.
func HookOnSessionStart() string { return "herald.hooks.on_session_start" }
func HookPreLLMCall() string     { return "herald.hooks.pre_llm_call" }
func HookPreAPIRequest() string  { return "herald.hooks.pre_api_request" }
func HookPostAPIRequest() string { return "herald.hooks.post_api_request" }
func HookPreToolCall() string    { return "herald.hooks.pre_tool_call" }

// Owners of LLM responses: each consumes only its own replies.
const (
	OwnerLoop       = "loop"
	OwnerCompressor = "compressor"
)

// DefaultPool is the tool-runner pool of tasks that name none.
const DefaultPool = "default"

func SessionEvents(sid string) string    { return "herald.session." + sid + ".events" }
func SessionResult(sid string) string    { return "herald.session." + sid + ".result" }
func SessionInterrupt(sid string) string { return "herald.session." + sid + ".interrupt" }
func SessionInput(sid string) string     { return "herald.session." + sid + ".input" }
func SessionLog(sid string) string       { return "herald.session." + sid + ".log" }

func LLMRequest(sid string) string           { return "herald.llm.request." + sid }
func LLMResponse(owner, sid string) string   { return "herald.llm.response." + owner + "." + sid }
func ToolCall(pool, sid string) string       { return "herald.tool.call." + pool + "." + sid }
func MemoryCall(sid string) string           { return "herald.memory.call." + sid }
func ToolResult(sid, callID string) string   { return "herald.tool.result." + sid + "." + Token(callID) }
func CompressRequest(sid string) string      { return "herald.compress.request." + sid }
func CompressResult(sid string) string       { return "herald.compress.result." + sid }
func UsageSubject(tenant string) string      { return "herald.usage." + Token(tenant) }
func ToolEventSubject(tenant string) string  { return "herald.toolevents." + Token(tenant) }
func DeadLetterSubject(stream string) string { return dlqPrefix + stream }
func ToolRunnerFilter(pool string) string    { return "herald.tool.call." + pool + ".>" }
func LLMResponseFilter(owner string) string  { return "herald.llm.response." + owner + ".>" }

// Token returns s when it is a valid subject token, else a stable hash of it,
// so ids chosen by models or users can never break a subject.
func Token(s string) string {
	if proto.IsToken(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(sum[:12])
}
