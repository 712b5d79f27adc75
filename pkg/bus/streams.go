package bus

import (
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names.
const (
	StreamTasks           = "TASKS"
	StreamSessions        = "SESSIONS"
	StreamEvents          = "EVENTS"
	StreamControl         = "CONTROL"
	StreamLLMRequests     = "LLM_REQUESTS"
	StreamLLMResponses    = "LLM_RESPONSES"
	StreamToolCalls       = "TOOL_CALLS"
	StreamToolResults     = "TOOL_RESULTS"
	StreamCompress        = "COMPRESS"
	StreamCompressResults = "COMPRESS_RESULTS"
	StreamUsage           = "USAGE"
	StreamToolEvents      = "TOOL_EVENTS"
	StreamDLQ             = "DLQ"
	// StreamSchedules holds the api service's schedules as JetStream
	// message schedules (herald.schedule.<id>) and the messages they fire
	// (herald.schedule.<id>.fire).
	StreamSchedules = "SCHEDULES"
	// StreamAlerts keeps alerts (herald.alerts.>), such as budget alerts,
	// for the webhook that forwards them and for `herald budgets`.
	StreamAlerts = "ALERTS"
)

// BudgetAlertsSubject carries budget alerts (proto.BudgetAlert).
const BudgetAlertsSubject = "herald.alerts.budget"

// AlertsTTL is how long alerts are kept.
const AlertsTTL = 90 * day

// ScheduleFireTTL is how long a fired schedule message waits for the api
// service to turn it into a task.
const ScheduleFireTTL = 7 * day

// KV buckets.
const (
	BucketSessions = "herald_sessions"
	BucketMemory   = "herald_memory"
	BucketSpend    = "herald_spend"
	// BucketToolRunner is the tool runners' own state: started markers of
	// non-idempotent calls, circuit breakers, todo lists.
	BucketToolRunner = "herald_toolrunner"
	// BucketAccounting holds the accounting sinks' insert leases.
	BucketAccounting = "herald_accounting"
	// BucketToolSets holds the tool sets LLM requests refer to by digest
	// (pkg/toolset).
	BucketToolSets = "herald_toolsets"
	// BucketAPIKeys holds the api service's keys: id, name, tenant and the
	// key's SHA-256, never the key itself.
	BucketAPIKeys = "herald_api_keys"
	// BucketAPIRuns holds the api service's runs and which tenant owns each
	// session it started.
	BucketAPIRuns = "herald_api_runs"
	// BucketProviderLimits holds, per provider, what the gateways have in
	// flight and how fast they may send (providers.<name>.max_concurrent,
	// rpm, tpm): one record each, changed by compare-and-set.
	BucketProviderLimits = "herald_provider_limits"
)

// BucketReturns counts, per message, how often a worker handed it back
// to its stream while it waited for a limit (returns.go), so that those
// deliveries never count toward its MaxDeliver.
const BucketReturns = "herald_returns"

// ReturnsTTL drops a message's count this long after it was last handed
// back (one waiting is handed back every few seconds at most).
const ReturnsTTL = time.Hour

// ProviderLimitsTTL drops the record of a provider nobody called for this long.
const ProviderLimitsTTL = time.Hour

// APIRunTTL is how long the api service remembers a run.
const APIRunTTL = 30 * day

// ToolSetTTL is how long a stored tool set lives unless it is stored again;
// the loop stores each set it uses at least once a day (pkg/toolset).
const ToolSetTTL = 7 * day

// ToolRunnerStateTTL bounds how long a session's runner state is kept;
// AccountingLeaseTTL how long a sink that died holding a lease blocks the
// others.
const (
	ToolRunnerStateTTL = 30 * 24 * time.Hour
	AccountingLeaseTTL = 10 * time.Second
)

// DedupWindow is how long a repeated Nats-Msg-Id is recognised. Effects are
// also made idempotent by their consumers, so this only has to cover retries.
const DedupWindow = 10 * time.Minute

// Limits that keep every stream bounded.
const (
	day               = 24 * time.Hour
	UsageStreamBytes  = 1 << 30
	defaultMaxMsgSize = 8 << 20
)

// Streams returns every stream Herald uses. Storage is file-backed so that a
// restart of the server loses nothing; replicas come from the caller.
func Streams(replicas int) []jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	s := func(name string, subjects []string, ret jetstream.RetentionPolicy, maxAge time.Duration) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Subjects: subjects, Retention: ret, MaxAge: maxAge,
			Storage: jetstream.FileStorage, Replicas: replicas, Duplicates: DedupWindow,
			MaxMsgSize: defaultMaxMsgSize, Discard: jetstream.DiscardOld,
		}
	}
	// work is a work-queue stream, with its anchor (anchor.go).
	work := func(name string, subjects []string) jetstream.StreamConfig {
		cfg := s(name, append(subjects, AnchorSubject(name)), jetstream.WorkQueuePolicy, 0)
		cfg.AllowMsgTTL = true
		return cfg
	}
	// read is a stream whose messages are looked up by subject (a stored
	// result, a transcript entry): a direct get answers with the message
	// itself, not a JSON document holding it in base64 plus an advisory per
	// lookup (24 against 73 µs of CPU a lookup, docs/BENCHMARKS.md).
	read := func(cfg jetstream.StreamConfig) jetstream.StreamConfig {
		cfg.AllowDirect = true
		return cfg
	}
	usage := work(StreamUsage, []string{"herald.usage.>"})
	usage.MaxBytes, usage.Discard = UsageStreamBytes, jetstream.DiscardNew
	toolEvents := work(StreamToolEvents, []string{"herald.toolevents.>"})
	toolEvents.MaxBytes, toolEvents.Discard = UsageStreamBytes, jetstream.DiscardNew
	schedules := s(StreamSchedules, []string{ScheduleFilter, ScheduleFireFilter}, jetstream.LimitsPolicy, 0)
	schedules.AllowMsgSchedules, schedules.AllowMsgTTL = true, true
	return []jetstream.StreamConfig{
		// direct gets: a crowded loop reads tasks past its window (peek.go)
		read(work(StreamTasks, slices.Clone(TaskSubjects))),
		read(s(StreamSessions, []string{SessionLogFilter, "herald.session.*.result", tenantPrefix + "*.session.*.result"}, jetstream.LimitsPolicy, 0)),
		s(StreamEvents, []string{"herald.session.*.events", tenantPrefix + "*.session.*.events"}, jetstream.LimitsPolicy, day),
		s(StreamControl, []string{"herald.session.*.interrupt", "herald.session.*.input",
			tenantPrefix + "*.session.*.interrupt", tenantPrefix + "*.session.*.input"}, jetstream.LimitsPolicy, day),
		work(StreamLLMRequests, []string{"herald.llm.request.>"}),
		read(s(StreamLLMResponses, []string{"herald.llm.response.>"}, jetstream.LimitsPolicy, 7*day)),
		work(StreamToolCalls, []string{"herald.tool.call.>", "herald.memory.call.>"}),
		read(s(StreamToolResults, []string{"herald.tool.result.>"}, jetstream.LimitsPolicy, 30*day)),
		work(StreamCompress, []string{"herald.compress.request.>"}),
		read(s(StreamCompressResults, []string{"herald.compress.result.>"}, jetstream.LimitsPolicy, 7*day)),
		usage,
		toolEvents,
		s(StreamDLQ, []string{dlqPrefix + ">"}, jetstream.LimitsPolicy, 0),
		schedules,
		s(StreamAlerts, []string{"herald.alerts.>"}, jetstream.LimitsPolicy, AlertsTTL),
	}
}

// Buckets returns every KV bucket Herald uses.
func Buckets(replicas int) []jetstream.KeyValueConfig {
	if replicas < 1 {
		replicas = 1
	}
	return []jetstream.KeyValueConfig{
		{Bucket: BucketSessions, History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketLimits, History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketReturns, History: 1, TTL: ReturnsTTL, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "how often each waiting message was handed back to its stream"},
		{Bucket: BucketMemory, History: 5, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketSpend, History: 1, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketToolRunner, History: 1, TTL: ToolRunnerStateTTL, Storage: jetstream.FileStorage, Replicas: replicas},
		{Bucket: BucketAccounting, History: 1, TTL: AccountingLeaseTTL, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "accounting sink insert leases"},
		{Bucket: BucketToolSets, History: 1, TTL: ToolSetTTL, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "tool sets LLM requests refer to by digest"},
		{Bucket: BucketAPIKeys, History: 1, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "api keys: hashes, names and tenants"},
		{Bucket: BucketAPIRuns, History: 1, TTL: APIRunTTL, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "api runs and session owners"},
		{Bucket: BucketPrices, History: 5, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "imported model prices (herald prices import)"},
		{Bucket: BucketProviderLimits, History: 1, TTL: ProviderLimitsTTL, Storage: jetstream.FileStorage, Replicas: replicas,
			Description: "calls in flight and send rates per provider, shared by the gateways"},
	}
}

// ObjectStores returns every object store Herald uses: the claim stores.
// A claim lives as long as the messages of its stream (work queues, whose
// messages wait until consumed, keep claims for claimTTL).
func ObjectStores(replicas int) []jetstream.ObjectStoreConfig {
	var out []jetstream.ObjectStoreConfig
	for _, cfg := range Streams(replicas) {
		if !slices.Contains(ClaimStreams, cfg.Name) {
			continue
		}
		ttl := cfg.MaxAge
		if cfg.Retention == jetstream.WorkQueuePolicy {
			ttl = claimTTL
		}
		out = append(out, jetstream.ObjectStoreConfig{Bucket: ClaimStore(cfg.Name), Storage: jetstream.FileStorage,
			Replicas: cfg.Replicas, TTL: ttl})
	}
	return out
}
