package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	gproto "google.golang.org/protobuf/proto"
)

// capacityReport is what `herald status` and the dashboard's capacity page
// show: per consumer, per tenant and per tool-runner pool, the work waiting
// (not yet taken), in flight (taken, not yet acknowledged) and the age of
// the oldest waiting; the runners of each pool; and warnings.
type capacityReport struct {
	At        time.Time      `json:"at"`
	Consumers []consumerLoad `json:"consumers"`
	Tenants   []tenantLoad   `json:"tenants"`
	Pools     []poolLoad     `json:"pools"`
	Warnings  []string       `json:"warnings"`
	// Partial is set when a stream held more unacknowledged messages than
	// were read for the tenant and pool figures (the consumer figures are whole).
	Partial bool `json:"partial,omitempty"`
}

type consumerLoad struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	Waiting  uint64 `json:"waiting"`
	InFlight int    `json:"in_flight"`
	// Pulls are the pull requests waiting for work: processes with a free hand.
	Pulls      int     `json:"pull_requests"`
	OldestAgeS float64 `json:"oldest_age_s"`
}

type tenantLoad struct {
	Tenant     string  `json:"tenant"`
	Stream     string  `json:"stream"`
	Waiting    int     `json:"waiting"`
	InFlight   int     `json:"in_flight"`
	OldestAgeS float64 `json:"oldest_age_s"`
}

type poolLoad struct {
	Pool       string  `json:"pool"`
	Waiting    int     `json:"waiting"`
	InFlight   int     `json:"in_flight"`
	OldestAgeS float64 `json:"oldest_age_s"`
	Runners    int     `json:"runners"`
	// NoRunner flags a pool with work and no runner answering.
	NoRunner bool `json:"no_runner"`
}

// scannedStreams are the work streams whose messages name a tenant, with
// the consumer that takes them (TOOL_CALLS: one per pool).
var scannedStreams = map[string]string{bus.StreamTasks: bus.LoopTasksConsumer, bus.StreamLLMRequests: "gateway",
	bus.StreamToolCalls: "", bus.StreamCompress: "compressor"}

// capacityOptions: the tenant of work that names none, the messages read
// per stream at most, and pool_warning_after.
type capacityOptions struct {
	defaultTenant string
	scanLimit     int
	warnAfter     time.Duration
	pingWait      time.Duration
}

// collectCapacity reads the consumers' state, the unacknowledged messages
// of the work streams and the runners' answers to a ping.
func collectCapacity(ctx context.Context, js jetstream.JetStream, o capacityOptions) (capacityReport, error) {
	rep := capacityReport{At: time.Now().UTC(), Consumers: []consumerLoad{}, Tenants: []tenantLoad{}, Pools: []poolLoad{}, Warnings: []string{}}
	delivered := map[string]uint64{} // stream/consumer → last delivered stream sequence
	for name := range js.StreamNames(ctx).Name() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return rep, fmt.Errorf("stream %s: %w", name, err)
		}
		for ci := range st.ListConsumers(ctx).Info() {
			if ci.Config.Durable == "" {
				continue
			}
			delivered[name+"/"+ci.Name] = ci.Delivered.Stream
			rep.Consumers = append(rep.Consumers, consumerLoad{Stream: name, Consumer: ci.Name, Waiting: ci.NumPending,
				InFlight: ci.NumAckPending, Pulls: ci.NumWaiting, OldestAgeS: oldestAge(ctx, st, ci, rep.At)})
		}
		if _, ok := scannedStreams[name]; ok {
			rep.Partial = scanStream(ctx, st, name, delivered, o, &rep) || rep.Partial
		}
	}
	sort.Slice(rep.Consumers, func(i, j int) bool {
		a, b := rep.Consumers[i], rep.Consumers[j]
		return a.Stream < b.Stream || a.Stream == b.Stream && a.Consumer < b.Consumer
	})
	runners := pingRunners(js.Conn(), o.pingWait)
	rep.Pools = mergeRunners(rep.Pools, runners)
	for i := range rep.Pools {
		p := &rep.Pools[i]
		if p.Waiting == 0 || p.Runners > 0 {
			continue
		}
		p.NoRunner = true
		msg := fmt.Sprintf("pool %q: %d tool calls waiting, the oldest %s, and no tool runner takes them (start one: herald serve toolrunner --pool %s)",
			p.Pool, p.Waiting, seconds(p.OldestAgeS), p.Pool)
		if time.Duration(p.OldestAgeS*float64(time.Second)) >= o.warnAfter {
			msg += fmt.Sprintf("; past tools.pool_warning_after (%s): the sessions were warned", o.warnAfter)
		}
		rep.Warnings = append(rep.Warnings, msg)
	}
	return rep, nil
}

// oldestAge is the age of the consumer's oldest message not yet acknowledged.
func oldestAge(ctx context.Context, st jetstream.Stream, ci *jetstream.ConsumerInfo, now time.Time) float64 {
	if ci.NumPending == 0 && ci.NumAckPending == 0 {
		return 0
	}
	filters := ci.Config.FilterSubjects
	if ci.Config.FilterSubject != "" {
		filters = append(filters, ci.Config.FilterSubject)
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var oldest time.Time
	for _, f := range filters {
		m, err := st.GetMsg(ctx, ci.AckFloor.Stream+1, jetstream.WithGetMsgSubject(f))
		if err == nil && (oldest.IsZero() || m.Time.Before(oldest)) {
			oldest = m.Time
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return now.Sub(oldest).Seconds()
}

// scanStream reads up to scanLimit of the stream's unacknowledged messages
// and adds them to the tenant (and, for tool calls, pool) figures; it
// reports whether more were left unread.
func scanStream(ctx context.Context, st jetstream.Stream, name string, delivered map[string]uint64, o capacityOptions, rep *capacityReport) bool {
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return false
	}
	first := info.State.FirstSeq
	if c := scannedStreams[name]; c != "" && name == bus.StreamTasks {
		// the tasks stream keeps its tasks: start after what the loop acknowledged
		if ci, err := st.Consumer(ctx, c); err == nil {
			if cinfo, err := ci.Info(ctx); err == nil {
				first = max(first, cinfo.AckFloor.Stream+1)
			}
		}
	}
	tenants := map[string]*tenantLoad{}
	pools := map[string]*poolLoad{}
	read := 0
	for seq := first; seq <= info.State.LastSeq; seq++ {
		if read >= o.scanLimit {
			break
		}
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return true
		}
		seq = m.Sequence
		read++
		consumer, pool := scannedStreams[name], ""
		if name == bus.StreamToolCalls {
			consumer, pool = toolCallConsumer(m.Subject)
		}
		waiting := m.Sequence > delivered[name+"/"+consumer]
		age := rep.At.Sub(m.Time).Seconds()
		t := tenants[tenantOfMsg(name, m, o.defaultTenant)]
		if t == nil {
			t = &tenantLoad{Tenant: tenantOfMsg(name, m, o.defaultTenant), Stream: name}
			tenants[t.Tenant] = t
		}
		tally(&t.Waiting, &t.InFlight, &t.OldestAgeS, waiting, age)
		if pool != "" {
			p := pools[pool]
			if p == nil {
				p = &poolLoad{Pool: pool}
				pools[pool] = p
			}
			tally(&p.Waiting, &p.InFlight, &p.OldestAgeS, waiting, age)
		}
	}
	for _, t := range tenants {
		rep.Tenants = append(rep.Tenants, *t)
	}
	sort.Slice(rep.Tenants, func(i, j int) bool {
		a, b := rep.Tenants[i], rep.Tenants[j]
		return a.Stream < b.Stream || a.Stream == b.Stream && a.Tenant < b.Tenant
	})
	for _, p := range pools {
		rep.Pools = append(rep.Pools, *p)
	}
	return read >= o.scanLimit && info.State.Msgs > uint64(read)
}

func tally(waiting, inFlight *int, oldest *float64, isWaiting bool, age float64) {
	if !isWaiting {
		*inFlight++
		return
	}
	*waiting++
	*oldest = max(*oldest, age)
}

// toolCallConsumer names the consumer of a tool call's subject and its pool
// (memory calls go to the memory service).
func toolCallConsumer(subject string) (consumer, pool string) {
	rest, ok := strings.CutPrefix(subject, "herald.tool.call.")
	if !ok {
		return "memory", ""
	}
	pool, _, _ = strings.Cut(rest, ".")
	if strings.HasSuffix(rest, ".read") {
		return bus.ToolReadsConsumer(pool), pool
	}
	return bus.ToolRunnerConsumer(pool), pool
}

// tenantOfMsg reads the tenant a piece of work is for.
func tenantOfMsg(stream string, m *jetstream.RawStreamMsg, def string) string {
	if m.Header.Get(bus.HeaderClaim) != "" {
		return "(claimed payload)"
	}
	var tenant string
	switch stream {
	case bus.StreamTasks:
		if o, err := bus.TaskOriginOf(m.Subject); err == nil && o.Tenant != "" {
			return o.Tenant
		}
		var t struct {
			Tenant string `json:"tenant"`
		}
		_ = json.Unmarshal(m.Data, &t)
		tenant = t.Tenant
	case bus.StreamLLMRequests:
		tenant = decodeTenant(m.Data, &heraldpb.LLMRequest{})
	case bus.StreamToolCalls:
		tenant = decodeTenant(m.Data, &heraldpb.ToolCallRequest{})
	case bus.StreamCompress:
		tenant = decodeTenant(m.Data, &heraldpb.CompressRequest{})
	}
	if tenant == "" {
		return def
	}
	return tenant
}

func decodeTenant[T interface {
	gproto.Message
	GetTenant() string
}](data []byte, msg T) string {
	if bus.Decode(data, msg) != nil {
		return ""
	}
	return msg.GetTenant()
}

// pingRunners asks every tool runner for its pool and counts the answers
// that come within wait.
func pingRunners(nc *nats.Conn, wait time.Duration) map[string]int {
	out := map[string]int{}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return out
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(bus.RunnersPing, inbox, nil); err != nil {
		return out
	}
	deadline := time.Now().Add(wait)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return out
		}
		var pong struct {
			Pool string `json:"pool"`
		}
		if json.Unmarshal(m.Data, &pong) == nil && pong.Pool != "" {
			out[pong.Pool]++
		}
	}
}

// mergeRunners adds the runner counts to the pools, and the pools that
// have runners and no work.
func mergeRunners(pools []poolLoad, runners map[string]int) []poolLoad {
	seen := map[string]bool{}
	for i := range pools {
		pools[i].Runners = runners[pools[i].Pool]
		seen[pools[i].Pool] = true
	}
	for pool, n := range runners {
		if !seen[pool] {
			pools = append(pools, poolLoad{Pool: pool, Runners: n})
		}
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Pool < pools[j].Pool })
	return pools
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}
