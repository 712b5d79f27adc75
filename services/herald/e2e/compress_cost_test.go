package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/loop"
	"github.com/stretchr/testify/require"
)

// spendLedger adds up what the scripted model reported, priced by the
// harness's table for test-model ($1 input, $2 output, $0.50 cache read per
// million tokens: 1000, 2000 and 500 nano-USD a token).
type spendLedger struct {
	mu sync.Mutex
	spendTotals
}

type spendTotals struct {
	calls, summaryCalls    int
	input, output, cacheRd int64
	costNano, summaryNano  uint64
	agentCallsAfterSummary int
}

func (l *spendLedger) record(summary bool, u scripted.Usage) *scripted.Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := u.PromptTokens - u.CachedTokens
	nano := uint64(in)*1000 + uint64(u.CompletionTokens)*2000 + uint64(u.CachedTokens)*500
	l.calls++
	l.input, l.output, l.cacheRd = l.input+in, l.output+u.CompletionTokens, l.cacheRd+u.CachedTokens
	l.costNano += nano
	if summary {
		l.summaryCalls++
		l.summaryNano += nano
	} else if l.summaryCalls > 0 {
		l.agentCallsAfterSummary++
	}
	return &u
}

func (l *spendLedger) totals() spendTotals {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spendTotals
}

// compressingScript reads three files, is refused once as too long (so the
// loop compresses and the compressor asks the model for a summary), then
// answers. Every billed reply reports its own usage; the summary's is large
// and known.
func compressingScript(l *spendLedger, summary scripted.Usage) scripted.Script {
	return func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Reply{Content: "## Goal\nRead.\n## Remaining work\nAnswer.", Usage: l.record(true, summary)}
		}
		step := int64(r.AssistantCount())
		u := scripted.Usage{PromptTokens: 900 + 10*step, CachedTokens: 50 * step, CompletionTokens: 20 + step}
		if lastFileRead(r) < 2 {
			return scripted.Reply{ToolCalls: []scripted.Call{{Name: "read_file", Args: fmt.Sprintf(`{"path":"f%d.txt"}`, lastFileRead(r)+1)}},
				Usage: l.record(false, u)}
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), "file 1 line 0") {
				// Refused before any token was processed: no usage, no cost.
				return scripted.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4000 tokens","code":"context_length_exceeded"}}`}
			}
		}
		return scripted.Reply{Content: "done after compression", Usage: l.record(false, u)}
	}
}

func startCompressing(t *testing.T, l *spendLedger, summary scripted.Usage) *H {
	h := Start(t, compressingScript(l, summary), WithClickHouse(t), withConfig(func(c *config.Config) {
		c.Compression.ProtectLastN = 2
		c.Compression.ProtectFirstN = 2
	}))
	for i := range 3 {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	return h
}

// TestCompressionSummaryCostIsOneFigureEverywhere: a session whose history
// is compressed (its summary call billed, purpose compression) has one cost:
// the result's cost_usd and usage, `herald sessions list` and ClickHouse's
// sum for the session all equal what the scripted model reported, priced by
// the table, the summary call included.
func TestCompressionSummaryCostIsOneFigureEverywhere(t *testing.T) {
	l := &spendLedger{}
	h := startCompressing(t, l, scripted.Usage{PromptTokens: 5000, CachedTokens: 1000, CompletionTokens: 700})
	task := NewTask("read three files")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	require.Equal(t, "done after compression", res.FinalResponse)
	require.Contains(t, res.ContinuedAs, task.SessionID+"-c", "the history was compressed")
	waitStreamEmpty(t, h, bus.StreamUsage)

	want := l.totals()
	require.Equal(t, 1, want.summaryCalls, "one summary call")
	require.Equal(t, uint64(4000*1000+700*2000+1000*500), want.summaryNano)

	requireSameUSD(t, want.costNano, res.CostUSD, "result cost_usd covers the summary call")
	require.Equal(t, want.input, res.Usage.InputTokens, "uncached input tokens")
	require.Equal(t, want.output, res.Usage.OutputTokens, "output tokens")
	require.Equal(t, want.cacheRd, res.Usage.CacheReadTokens, "cache-read tokens")

	ctx := context.Background()
	dsn := h.Config.ClickHouseDSN
	conn := openClickHouse(t, dsn)
	var cost, summaryCost, rows, elsewhere uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT sum(cost_nano_usd), sumIf(cost_nano_usd, purpose = 'compression'), count(), "+
		"countIf(session_id != ?) FROM usage_events", task.SessionID).Scan(&cost, &summaryCost, &rows, &elsewhere))
	require.Equal(t, want.costNano, cost, "ClickHouse's sum for the session")
	require.Equal(t, want.summaryNano, summaryCost, "the summary call is billed as purpose compression")
	require.Zero(t, elsewhere, "nothing is billed to the continuation id %s", res.ContinuedAs)
	require.Equal(t, uint64(res.APICalls), rows, "api_calls counts every billed attempt, the summary's included")

	one, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{By: "model", Session: task.SessionID})
	require.NoError(t, err)
	require.Equal(t, want.costNano, one.Total.CostNanoUSD, "herald cost --session")

	// What `herald sessions list` prints (its COST USD column).
	states, err := loop.ListSessions(ctx, h.JS)
	require.NoError(t, err)
	require.Len(t, states, 1, "the continuation is not a session of its own")
	require.Equal(t, task.SessionID, states[0].SessionID)
	requireSameUSD(t, want.costNano, states[0].SessionCostUSD, "herald sessions list")

	// The compression result delivered again (a loop that stored the
	// transition but died before its ack) is not counted again.
	raw, err := bus.LastOnSubject(ctx, h.JS, bus.StreamCompressResults, bus.CompressResult(task.SessionID))
	require.NoError(t, err)
	var again heraldpb.CompressResult
	require.NoError(t, bus.Decode(raw.Data, &again))
	require.Positive(t, again.SummaryCostUsd, "the result carries the summary's cost")
	requireSameUSD(t, want.summaryNano, again.SummaryCostUsd, "the compressor's figure for the summary")
	require.NoError(t, bus.PublishProto(ctx, h.JS, bus.CompressResult(task.SessionID), again.RequestId+":again", &again))
	seq := lastSeq(t, h, bus.StreamCompressResults)
	require.Eventually(t, func() bool {
		c, err := h.JS.Consumer(ctx, bus.StreamCompressResults, "loop-compress")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= seq
	}, time.Minute, 20*time.Millisecond, "the loop never took the redelivered result")
	st, err := loop.LoadSession(ctx, h.JS, task.SessionID)
	require.NoError(t, err)
	requireSameUSD(t, want.costNano, st.SessionCostUSD, "sessions list after a redelivery")

	t.Logf("compression cost: result %.9f USD = sessions list = ClickHouse %d nano-USD (summary %d) over %d billed calls",
		res.CostUSD, cost, summaryCost, rows)
}

// TestCompressionSummaryCountsAgainstTheBudget: a max_cost_usd the agent's
// own calls stay under but the summary call pushes over ends the turn
// budget_exhausted, with no model call after the summary.
func TestCompressionSummaryCountsAgainstTheBudget(t *testing.T) {
	l := &spendLedger{}
	// Agent calls cost about 3*(0.00096) USD; the summary 0.1 USD.
	h := startCompressing(t, l, scripted.Usage{PromptTokens: 100_000, CompletionTokens: 0})
	task := NewTask("read three files")
	task.MaxCostUSD = 0.05
	res := h.Run(task)
	require.Equal(t, proto.ExitBudgetExhausted, res.ExitReason, "result: %+v", res)
	require.Contains(t, res.FinalResponse, "max_cost_usd")
	want := l.totals()
	require.Equal(t, 1, want.summaryCalls)
	require.Zero(t, want.agentCallsAfterSummary, "no model call after the summary used up the budget")
	requireSameUSD(t, want.costNano, res.CostUSD, "the result's cost includes the summary")
	require.Greater(t, res.CostUSD, task.MaxCostUSD)
	require.Less(t, res.CostUSD-want.summaryNanoUSD(), task.MaxCostUSD, "the agent's own calls alone were under budget")
	waitStreamEmpty(t, h, bus.StreamUsage)
	var cost uint64
	require.NoError(t, openClickHouse(t, h.Config.ClickHouseDSN).QueryRow(context.Background(),
		"SELECT sum(cost_nano_usd) FROM usage_events WHERE session_id = ?", task.SessionID).Scan(&cost))
	require.Equal(t, want.costNano, cost)
}

func (l spendTotals) summaryNanoUSD() float64 { return float64(l.summaryNano) / 1e9 }

func lastSeq(t *testing.T, h *H, stream string) uint64 {
	t.Helper()
	s, err := h.JS.Stream(context.Background(), stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.LastSeq
}
