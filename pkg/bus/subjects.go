package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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

// ContextFiles is where the loop asks a tool runner of pool for a session's
// context files (proto.ContextFilesRequest): the runner that owns the
// workspace reads them, confined to it. Only the loop may ask.
func ContextFiles(pool string) string { return "herald.tools.context." + pool }

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

// RunnersPing is asked by `herald status`: every tool runner answers it
// (no queue group) with its pool, so the runners of each pool are counted.
const RunnersPing = "herald.runners.ping"

// ProvidersPaused carries a provider's pause (a 429's Retry-After) from the
// gateway that was refused to every other gateway (core NATS, no stream),
// so none of them asks the provider again before it ends.
const ProvidersPaused = "herald.providers.paused"

// DefaultPool is the tool-runner pool of tasks that name none.
const DefaultPool = "default"

// LoopTasksConsumer is the loop's durable consumer of TASKS: where it is
// missing, no Herald runs a task (herald run checks for it).
const LoopTasksConsumer = "loop-tasks"

// Tenant-bound tasks and sessions (issue 15): a task published on
// herald.tasks.<tenant> belongs to that tenant, and its session's events and
// results are also published under herald.tenant.<tenant>., so NATS
// permissions can confine a tenant's user to its own sessions.
const (
	TenantTasksFilter = TasksSubject + ".*"
	tenantPrefix      = "herald.tenant."
)

func TenantTasks(tenant string) string { return TasksSubject + "." + tenant }
func TenantSessionEvents(tenant, sid string) string {
	return tenantPrefix + tenant + ".session." + sid + ".events"
}
func TenantSessionResult(tenant, sid string) string {
	return tenantPrefix + tenant + ".session." + sid + ".result"
}

// TenantSessionInterrupt and TenantSessionInput are a tenant's own ways to
// stop its session's turn and answer its questions; the loop and the tool
// runner act on them only for a session bound to that tenant.
func TenantSessionInterrupt(tenant, sid string) string {
	return tenantPrefix + tenant + ".session." + sid + ".interrupt"
}
func TenantSessionInput(tenant, sid string) string {
	return tenantPrefix + tenant + ".session." + sid + ".input"
}

// InterruptFilters are the subjects of every interrupt, a tenant's included.
var InterruptFilters = []string{"herald.session.*.interrupt", tenantPrefix + "*.session.*.interrupt"}

// InterruptedSession reads an interrupt's subject: the session and, for a
// tenant's interrupt, the tenant it claims the session for.
func InterruptedSession(subject string) (sid, tenant string, ok bool) {
	p := strings.Split(subject, ".")
	switch {
	case len(p) == 4 && p[0] == "herald" && p[1] == "session" && p[3] == "interrupt":
		return p[2], "", proto.IsToken(p[2])
	case len(p) == 6 && p[0] == "herald" && p[1] == "tenant" && p[3] == "session" && p[5] == "interrupt":
		return p[4], p[2], proto.IsToken(p[4]) && proto.IsToken(p[2])
	}
	return "", "", false
}

// TaskTenant is the tenant a task subject binds its task to; ok is false
// for herald.tasks, whose tasks name their tenant in the body, and for a
// subject whose tenant token is not a tenant name (see TaskOriginOf).
func TaskTenant(subject string) (tenant string, ok bool) {
	o, err := TaskOriginOf(subject)
	return o.Tenant, err == nil && o.Tenant != ""
}

// Subagent tasks (issue 26): the child task of a delegate_task call travels
// on herald.subtasks (herald.subtasks.<tenant> for a tenant-bound parent),
// which only the loop's NATS user may publish (deploy/nats/herald.conf).
// Only a task that arrived there may name a parent; the same fields on
// herald.tasks* are refused.
const (
	SubtasksSubject       = "herald.subtasks"
	TenantSubtasksFilter  = SubtasksSubject + ".*"
	errBadTenantToken     = "the subject's tenant token %q is not a tenant name (letters, digits, '-' and '_', 1 to 128 of them)"
	errUnknownTaskSubject = "%q is not a task subject"
)

// API tasks (issue 30): the api service publishes the runs it starts for
// an API key or a schedule on herald.apitasks (herald.apitasks.<tenant> for
// a key's tenant), which only it may publish: only a task that arrived there
// may name the key (api_key_id) or schedule (schedule_id) whose budget it
// is charged to; the same fields on herald.tasks* are refused.
const (
	APITasksSubject      = "herald.apitasks"
	TenantAPITasksFilter = APITasksSubject + ".*"
)

func TenantAPITasks(tenant string) string { return APITasksSubject + "." + tenant }

// TaskSubjects are the subjects the TASKS stream captures and the loop
// consumes: public tasks, the api service's tasks and the loop's own
// subagent tasks.
var TaskSubjects = []string{TasksSubject, TenantTasksFilter, SubtasksSubject, TenantSubtasksFilter, APITasksSubject, TenantAPITasksFilter}

func TenantSubtasks(tenant string) string { return SubtasksSubject + "." + tenant }

// TaskOrigin is what a task's subject says about it.
type TaskOrigin struct {
	// Tenant is the tenant the subject binds the task to; "" for none.
	Tenant string
	// Subagent is set for a task on the loop's subagent subjects.
	Subagent bool
	// API is set for a task on the api service's subjects.
	API bool
}

// ErrTaskSubject is wrapped by TaskOriginOf's errors.
var ErrTaskSubject = errors.New("bad task subject")

// TaskOriginOf reads a task's subject. A tenant token that is not a valid
// tenant name is an error, never an unbound task: the stream captures
// herald.tasks.<any token>, and such a task must be dead-lettered.
func TaskOriginOf(subject string) (TaskOrigin, error) {
	for _, base := range []string{TasksSubject, SubtasksSubject, APITasksSubject} {
		o := TaskOrigin{Subagent: base == SubtasksSubject, API: base == APITasksSubject}
		if subject == base {
			return o, nil
		}
		tenant, ok := strings.CutPrefix(subject, base+".")
		if !ok {
			continue
		}
		if !proto.IsToken(tenant) {
			return o, fmt.Errorf("%w: "+errBadTenantToken, ErrTaskSubject, tenant)
		}
		o.Tenant = tenant
		return o, nil
	}
	return TaskOrigin{}, fmt.Errorf("%w: "+errUnknownTaskSubject, ErrTaskSubject, subject)
}

// Schedules (the api service): a schedule is a message on
// herald.schedule.<id> that JetStream fires onto herald.schedule.<id>.fire.
const (
	ScheduleFilter     = "herald.schedule.*"
	ScheduleFireFilter = "herald.schedule.*.fire"
)

func Schedule(id string) string     { return "herald.schedule." + id }
func ScheduleFire(id string) string { return "herald.schedule." + id + ".fire" }

func SessionEvents(sid string) string    { return "herald.session." + sid + ".events" }
func SessionResult(sid string) string    { return "herald.session." + sid + ".result" }
func SessionInterrupt(sid string) string { return "herald.session." + sid + ".interrupt" }
func SessionInput(sid string) string     { return "herald.session." + sid + ".input" }

// Internal session subjects live under herald.internal., never under the
// public herald.session.<sid>.> (JSON only, DESIGN.md): a subscriber to a
// session's public subjects sees its events and result, not its transcript.
const (
	internalSessionPrefix = "herald.internal.session."
	// SessionLogFilter selects every session's transcript on SESSIONS.
	SessionLogFilter = internalSessionPrefix + "*.log"
	// LegacySessionLogFilter is where releases before the internal
	// namespace kept transcripts; MigrateSessionLogs moves them.
	LegacySessionLogFilter = "herald.session.*.log"
)

// ToolRead is the subject of a call of a quick reading tool (read_file,
// search_files: toolspec.Quick), which a pool's runners take on a consumer
// of their own (ToolReadsConsumer), beside their other calls: a read then
// never waits behind long commands.
func ToolRead(pool, sid string) string { return ToolCall(pool, sid) + ".read" }

// ToolReadFilter is the filter of a pool's reads consumer; ToolRunnerFilter
// (one token after the pool) takes the pool's other calls.
func ToolReadFilter(pool string) string { return "herald.tool.call." + pool + ".*.read" }

// ToolRunnerConsumer and ToolReadsConsumer name a pool's two consumers on
// TOOL_CALLS (distinct prefixes: a pool name may hold '-').
func ToolRunnerConsumer(pool string) string { return "toolrunner-" + pool }
func ToolReadsConsumer(pool string) string  { return "toolreads-" + pool }

// SessionLog is the subject of a session's transcript entries (protobuf).
func SessionLog(sid string) string { return internalSessionPrefix + sid + ".log" }

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
func ToolRunnerFilter(pool string) string    { return "herald.tool.call." + pool + ".*" }
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

// TenantsFolder holds, under the tool runner's workspace root, the
// workspaces of tenant-bound sessions: tenants/<tenant>/<the task's workspace>.
const TenantsFolder = "tenants"

// TenantWorkspace is the workspace, under the runner's root, of a task of
// a tenant-bound session.
func TenantWorkspace(tenant, workspace string) string {
	if workspace == "" {
		return TenantsFolder + "/" + tenant
	}
	return TenantsFolder + "/" + tenant + "/" + workspace
}

// WorkspaceTenant is the tenant a tool call's session is bound to, read
// from its workspace; "" for a session bound to none. Only the loop, which
// refuses the tenants folder to unbound tasks, composes workspaces.
func WorkspaceTenant(tenant, workspace string) string {
	if tenant == "" || !proto.IsToken(tenant) {
		return ""
	}
	if w := TenantWorkspace(tenant, ""); workspace == w || strings.HasPrefix(workspace, w+"/") {
		return tenant
	}
	return ""
}
