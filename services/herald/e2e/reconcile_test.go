package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/loop"
	"github.com/stretchr/testify/require"
)

// reported is what the scripted model reported for the calls of one root
// session (the parent and its subagent together).
type reported struct {
	calls                                int
	input, output, cacheRead, reasoning  uint64
	costNano                             uint64
	parentTools, childTools, parentCalls int
	childCalls                           int
}

// ledger records every usage the scripted model reports, by root session.
type ledger struct {
	mu    sync.Mutex
	roots map[int]*reported
}

// The harness prices test-model at $1 input, $2 output and $0.50 cache
// read per million tokens: nano-USD per token 1000, 2000 and 500.
func (l *ledger) record(root int, child bool, u scripted.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.roots[root]
	if r == nil {
		r = &reported{}
		l.roots[root] = r
	}
	in := uint64(u.PromptTokens - u.CachedTokens)
	r.calls++
	r.input += in
	r.cacheRead += uint64(u.CachedTokens)
	r.output += uint64(u.CompletionTokens)
	r.reasoning += uint64(u.ReasoningTokens)
	r.costNano += in*1000 + uint64(u.CompletionTokens)*2000 + uint64(u.CachedTokens)*500
	if child {
		r.childCalls++
	} else {
		r.parentCalls++
	}
}

var (
	parentOf = regexp.MustCompile(`^reconcile #(\d+)\.$`)
	childOf  = regexp.MustCompile(`^child work #(\d+)\.`)
)

// reconcileScript: a parent writes two files at once, delegates a subagent
// (which writes one file), then answers. Every reply reports its own usage
// (cached and reasoning tokens included), recorded in l.
func reconcileScript(l *ledger) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		step := int64(r.AssistantCount())
		if m := childOf.FindStringSubmatch(r.FirstUser()); m != nil {
			i, _ := strconv.Atoi(m[1])
			u := scripted.Usage{PromptTokens: 700 + 10*int64(i) + step, CachedTokens: 100 * step, CompletionTokens: 30 + int64(i), ReasoningTokens: 7}
			l.record(i, true, u)
			if step == 0 {
				return scripted.Reply{ToolCalls: []scripted.Call{{Name: "write_file", Args: `{"path":"child.txt","content":"c"}`}}, Usage: &u}
			}
			return scripted.Reply{Content: fmt.Sprintf("child done #%d", i), Usage: &u}
		}
		m := parentOf.FindStringSubmatch(r.FirstUser())
		if m == nil {
			return scripted.Text("unexpected conversation")
		}
		i, _ := strconv.Atoi(m[1])
		u := scripted.Usage{PromptTokens: 1000 + 100*int64(i) + 10*step, CachedTokens: 64 * step, CompletionTokens: 50 + int64(i) + step, ReasoningTokens: 3 * step}
		l.record(i, false, u)
		switch step {
		case 0:
			return scripted.Reply{ToolCalls: []scripted.Call{
				{Name: "write_file", Args: `{"path":"a.txt","content":"a"}`},
				{Name: "write_file", Args: `{"path":"b.txt","content":"b"}`},
			}, Usage: &u}
		case 1:
			return scripted.Reply{ToolCalls: []scripted.Call{{Name: "delegate_task", Args: fmt.Sprintf(`{"goal":"child work #%d."}`, i)}}, Usage: &u}
		}
		return scripted.Reply{Content: fmt.Sprintf("done #%d", i), Usage: &u}
	}
}

// TestAccountingReconcilesWithWhatTheModelReported runs many sessions at
// once, each with parallel tool calls and a subagent, and checks every
// count and sum ClickHouse holds — usage rows, tokens by class, cost,
// tool_events rows — against what the scripted model reported, and that
// the parent's cost is one figure in its result, in `herald sessions list`
// and in `herald cost`.
func TestAccountingReconcilesWithWhatTheModelReported(t *testing.T) {
	const sessions = 12
	l := &ledger{roots: map[int]*reported{}}
	h := Start(t, reconcileScript(l), WithClickHouse(t))
	tasks := make([]proto.Task, sessions)
	for i := range tasks {
		tasks[i] = NewTask(fmt.Sprintf("reconcile #%d.", i))
		tasks[i].Workspace = tasks[i].SessionID
		h.Submit(tasks[i])
	}
	results := make([]proto.Result, sessions)
	for i, task := range tasks {
		results[i] = h.WaitResult(task, 2*time.Minute)
		require.Equal(t, proto.ExitTextResponse, results[i].ExitReason, "session %s: %s", task.SessionID, results[i].Error)
		require.Equal(t, fmt.Sprintf("done #%d", i), results[i].FinalResponse)
	}
	waitStreamEmpty(t, h, bus.StreamUsage)
	waitStreamEmpty(t, h, bus.StreamToolEvents)

	var all reported
	for i := range sessions {
		r := l.roots[i]
		require.Equal(t, 3, r.parentCalls, "root %d", i)
		require.Equal(t, 2, r.childCalls, "root %d", i)
		all.calls += r.calls
		all.input, all.output, all.cacheRead = all.input+r.input, all.output+r.output, all.cacheRead+r.cacheRead
		all.reasoning, all.costNano = all.reasoning+r.reasoning, all.costNano+r.costNano
	}

	dsn := h.Config.ClickHouseDSN
	ctx := context.Background()
	conn := openClickHouse(t, dsn)
	var rows, in, out, cacheRead, reasoning, cost, ids uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "+
		"sum(reasoning_tokens), sum(cost_nano_usd), uniqExact(event_id) FROM usage_events").
		Scan(&rows, &in, &out, &cacheRead, &reasoning, &cost, &ids))
	require.Equal(t, uint64(all.calls), rows, "one usage row per model call")
	require.Equal(t, rows, ids)
	require.Equal(t, all.input, in, "uncached input tokens")
	require.Equal(t, all.output, out, "output tokens")
	require.Equal(t, all.cacheRead, cacheRead, "cache-read tokens")
	require.Equal(t, all.reasoning, reasoning, "reasoning tokens")
	require.Equal(t, all.costNano, cost, "cost in nano-USD")

	var subagentRows, linked uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT countIf(purpose = 'subagent'), countIf(parent_session_id != '') FROM usage_events").
		Scan(&subagentRows, &linked))
	require.Equal(t, uint64(2*sessions), subagentRows, "each subagent's two calls are billed as purpose subagent")
	require.Equal(t, subagentRows, linked, "and name their parent")

	var toolRows, toolIDs uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(), uniqExact(event_id) FROM tool_events").Scan(&toolRows, &toolIDs))
	require.Equal(t, uint64(3*sessions), toolRows, "one tool_events row per execution: two per parent, one per subagent")
	require.Equal(t, toolRows, toolIDs)

	byRoot, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{By: "session"})
	require.NoError(t, err)
	require.Len(t, byRoot.Rows, sessions, "--by session: one row per parent, its subagent inside")
	require.Equal(t, all.costNano, byRoot.Total.CostNanoUSD)
	costOf := map[string]accounting.CostRow{}
	for _, r := range byRoot.Rows {
		costOf[r.Key] = r
	}
	states, err := loop.ListSessions(ctx, h.JS)
	require.NoError(t, err)
	listed := map[string]float64{}
	for _, s := range states {
		listed[s.SessionID] = s.SessionCostUSD
	}
	for i, task := range tasks {
		want := l.roots[i]
		got := costOf[task.SessionID]
		require.Equal(t, want.costNano, got.CostNanoUSD, "--by session, root %d", i)
		require.Equal(t, uint64(want.calls), got.Calls, "--by session, root %d", i)
		one, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{By: "model", Session: task.SessionID})
		require.NoError(t, err)
		require.Equal(t, want.costNano, one.Total.CostNanoUSD, "--session, root %d", i)
		require.Len(t, one.Subagents, 1)
		requireSameUSD(t, want.costNano, results[i].CostUSD, "result cost_usd of root %d", i)
		requireSameUSD(t, want.costNano, listed[task.SessionID], "sessions list, root %d", i)
		require.Equal(t, want.calls, results[i].APICalls)
		require.Equal(t, int64(want.output), results[i].Usage.OutputTokens)
		require.Equal(t, int64(want.input), results[i].Usage.InputTokens)
		require.Equal(t, int64(want.cacheRead), results[i].Usage.CacheReadTokens)
	}

	// The binary prints the same figure for a parent.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	outJSON, err := heraldCmd(t, cctx, t.TempDir(), map[string]string{"HERALD_CLICKHOUSE_DSN": dsn},
		"cost", "--session", tasks[0].SessionID, "--json").Output()
	require.NoError(t, err)
	var rep accounting.CostReport
	require.NoError(t, json.Unmarshal(outJSON, &rep), string(outJSON))
	require.Equal(t, l.roots[0].costNano, rep.Total.CostNanoUSD, "herald cost --session")
	t.Logf("reconcile: sessions=%d subagents=%d model_calls=%d tool_events=%d cost_nano_usd=%d: all equal to what the model reported",
		sessions, sessions, rows, toolRows, cost)
}

// requireSameUSD checks a float dollar figure against nano-USD to the nano.
func requireSameUSD(t *testing.T, nano uint64, usd float64, msg string, args ...any) {
	t.Helper()
	require.Equal(t, int64(nano), int64(math.Round(usd*1e9)), append([]any{msg}, args...)...)
}

func openClickHouse(t *testing.T, dsn string) clickhouse.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(dsn)
	require.NoError(t, err)
	conn, err := clickhouse.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// waitStreamEmpty waits for accounting to store and ack everything in a
// work-queue stream.
func waitStreamEmpty(t *testing.T, h *H, stream string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := bus.PendingWork(ctx, h.JS, stream)
		return err == nil && n == 0
	}, time.Minute, 50*time.Millisecond, "stream %s never drained into ClickHouse", stream)
}
