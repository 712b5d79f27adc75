package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/stretchr/testify/require"
)

// contextScript reads big.txt, then carries its result in carriedCalls
// model calls (each reading 30 lines of a smaller file), is refused once as
// too long (so the loop compresses and the summary drops the big result),
// then makes afterCalls more calls and answers. Every agent call after the
// first reports a cache read of all of its prompt but its last 50 tokens, as
// a provider that cached the previous call's prompt does.
type contextScript struct {
	carriedCalls, afterCalls int

	mu             sync.Mutex
	carried, after int
	bigText        string // the big result as the model received it
	compressed     bool
}

const bigMarker = "BIGLINE"

func (s *contextScript) reply(r *scripted.Request) scripted.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(r.Tools) == 0 { // the compressor's summary call
		return scripted.Reply{Content: "## Goal\nRead.\n## Remaining work\nAnswer.", Usage: &scripted.Usage{PromptTokens: 3000, CompletionTokens: 100}}
	}
	prompt := int64(len(r.Raw)/4 + 1)
	usage := &scripted.Usage{PromptTokens: prompt, CompletionTokens: 10, CachedTokens: prompt - 50}
	big := ""
	for _, m := range r.Messages {
		if m.ToolCallID == "ctx-big" && strings.Contains(m.Text(), bigMarker) {
			big = m.Text()
		}
	}
	switch {
	case big == "" && !s.compressed:
		usage.CachedTokens = 0
		return scripted.Reply{ToolCalls: []scripted.Call{{ID: "ctx-big", Name: "read_file", Args: `{"path":"big.txt"}`}}, Usage: usage}
	case big != "" && s.carried < s.carriedCalls:
		s.carried++
		s.bigText = big
		return smallRead(fmt.Sprintf("ctx-small-%d", s.carried), s.carried, usage)
	case big != "":
		s.compressed = true
		return scripted.Reply{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 4000 tokens","code":"context_length_exceeded"}}`}
	case s.after < s.afterCalls:
		s.after++
		return smallRead(fmt.Sprintf("ctx-after-%d", s.after), 10+s.after, usage)
	}
	return scripted.Reply{Content: "done", Usage: usage}
}

// smallRead reads small.txt from line n (distinct calls: the loop stops a
// call repeated with the same result).
func smallRead(id string, n int, u *scripted.Usage) scripted.Reply {
	args := fmt.Sprintf(`{"path":"small.txt","offset":%d,"limit":30}`, n)
	return scripted.Reply{ToolCalls: []scripted.Call{{ID: id, Name: "read_file", Args: args}}, Usage: u}
}

// TestToolContextCostIsItsTokensTimesThePriceOfEachCallThatCarriedIt: a
// tool result of T estimated tokens carried in N model calls costs T at the
// input price in the first (it was new there) and T at the cache-read price
// in each of the N-1 others (they read it from the provider's cache); the
// compression that summarized it away ends the charge, though the session
// goes on. `herald cost --by tool` (the built binary) shows the same figures.
func TestToolContextCostIsItsTokensTimesThePriceOfEachCallThatCarriedIt(t *testing.T) {
	const carriedCalls, afterCalls = 4, 3
	s := &contextScript{carriedCalls: carriedCalls, afterCalls: afterCalls}
	h := Start(t, s.reply, WithClickHouse(t), withConfig(func(c *config.Config) {
		c.Compression.ProtectLastN = 2
		c.Compression.ProtectFirstN = 1
	}))
	var big strings.Builder
	for i := range 200 {
		fmt.Fprintf(&big, "%s %04d %s\n", bigMarker, i, strings.Repeat("x", 90))
	}
	require.NoError(t, writeWorkspaceFile(h, "big.txt", big.String()))
	require.NoError(t, writeWorkspaceFile(h, "small.txt", strings.Repeat("a smaller file: 30 of its lines come after the big result\n", 60)))

	task := NewTask("read the big file, then the small one a few times")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	require.Contains(t, res.ContinuedAs, task.SessionID+"-c", "the history was compressed")
	require.Equal(t, afterCalls, s.after, "the session went on after compression")
	waitStreamEmpty(t, h, bus.StreamUsage)
	waitStreamEmpty(t, h, bus.StreamToolEvents)

	require.Contains(t, s.bigText, bigMarker)
	tokens := uint64(len(s.bigText)/4 + 1)
	require.Greater(t, tokens, uint64(5000), "the result is the 20 KB file")
	// test-model: $1 input, $0.50 cache read per million tokens.
	want := tokens*1000 + (carriedCalls-1)*tokens*500

	ctx := context.Background()
	conn := openClickHouse(t, h.Config.ClickHouseDSN)
	var calls, sumTokens, input, cacheRead, cost uint64
	var estimated uint8
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(), sum(tokens), sum(input_tokens), sum(cache_read_tokens), sum(cost_nano_usd), min(estimated) "+
		"FROM tool_context_costs FINAL WHERE session_id = ? AND call_id = 'ctx-big'", task.SessionID).
		Scan(&calls, &sumTokens, &input, &cacheRead, &cost, &estimated))
	require.Equal(t, uint64(carriedCalls), calls, "carried in exactly the calls before compression")
	require.Equal(t, carriedCalls*tokens, sumTokens)
	require.Equal(t, tokens, input, "the first call that carried it paid it as input")
	require.Equal(t, (carriedCalls-1)*tokens, cacheRead, "the others read it from the cache")
	require.Equal(t, want, cost, "N × tokens × the price, cache-aware")
	require.Equal(t, uint8(1), estimated, "the tokens are marked estimated (characters/4)")

	var afterRows uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM tool_context_costs FINAL WHERE session_id = ? AND call_id LIKE 'ctx-after-%'",
		task.SessionID).Scan(&afterRows))
	require.Positive(t, afterRows, "calls after compression still carry (and are charged for) the results they hold")

	// The built binary, as users run it.
	env := map[string]string{"HERALD_CLICKHOUSE_DSN": h.Config.ClickHouseDSN}
	out, code := runHerald(t, env, "cost", "--by", "tool", "--session", task.SessionID, "--json")
	require.Equal(t, 0, code, out)
	var rep accounting.ToolCostReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Rows, 1, "one tool: read_file")
	row := rep.Rows[0]
	require.Equal(t, "read_file", row.Tool)
	require.Equal(t, uint64(1+carriedCalls+afterCalls), row.Runs)
	require.Positive(t, row.OutputBytes)
	require.True(t, row.Estimated)
	var all uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT sum(cost_nano_usd) FROM tool_context_costs FINAL WHERE session_id = ?", task.SessionID).Scan(&all))
	require.Equal(t, all, row.ContextCostNanoUSD, "the CLI's figure is ClickHouse's")
	require.Greater(t, row.ContextCostNanoUSD, want, "the big result and the small ones")

	table, code := runHerald(t, env, "cost", "--by", "tool")
	require.Equal(t, 0, code, table)
	line := lineWith(t, table, "read_file")
	require.Contains(t, line, fmt.Sprintf("~%d", row.ContextTokens), table)
	require.Contains(t, line, fmt.Sprintf("%.6f", float64(all)/1e9), table)
	require.Contains(t, table, "~ tokens estimated as characters/4")

}
