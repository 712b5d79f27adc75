package e2e

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/stretchr/testify/require"
)

// costRow is one usage_events row as ClickHouse holds it.
type costRow struct {
	model                                           string
	input, output, cacheRead, cacheWrite, reasoning uint64
	cost                                            uint64
	status, class                                   string
}

// sseChunks is a chat-completions stream of the given chunk objects.
func sseChunks(chunks ...map[string]any) scripted.Reply {
	var b strings.Builder
	for _, c := range chunks {
		data, _ := json.Marshal(c)
		b.WriteString("data: " + string(data) + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return scripted.Reply{Raw: b.String(), ContentType: "text/event-stream"}
}

func delta(model string, d map[string]any, finish any, extra map[string]any) map[string]any {
	c := map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": model,
		"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func usageChunk(model string, usage map[string]any) map[string]any {
	return map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": model, "choices": []any{}, "usage": usage}
}

// TestProviderCostsAreReproducibleFromTheirClickHouseRows runs whole
// sessions against provider-shaped streams and checks, row by row in
// ClickHouse, that each attempt's cost is its tokens times the price table
// (and nothing else), that the figures are the providers' own, and that the
// session's result says the same.
func TestProviderCostsAreReproducibleFromTheirClickHouseRows(t *testing.T) {
	cases := []struct {
		name, provider, model string
		replies               []scripted.Reply
		rows                  []costRow
	}{
		{
			// source: grok-4 usage in cheesuschris/Carbon0 demo/test_xAI.md; xAI bills
			// reasoning at the output price beside completion_tokens
			name: "xai reasoning billed as output", provider: "xai", model: "grok-4-0709",
			replies: []scripted.Reply{sseChunks(
				delta("grok-4-0709", map[string]any{"role": "assistant", "content": "hi"}, nil, nil),
				delta("grok-4-0709", map[string]any{}, "stop", nil),
				usageChunk("grok-4-0709", map[string]any{"prompt_tokens": 703, "completion_tokens": 4, "total_tokens": 957,
					"prompt_tokens_details": map[string]any{"cached_tokens": 679}, "completion_tokens_details": map[string]any{"reasoning_tokens": 250}}),
			)},
			rows: []costRow{{input: 24, output: 254, cacheRead: 679, reasoning: 250, cost: 4_391_250, status: "ok"}},
		},
		{
			// source: Gemini counts thinking only in total_tokens (vercel/ai#6738)
			name: "gemini thinking in total only", provider: "gemini", model: "gemini-2.5-flash",
			replies: []scripted.Reply{sseChunks(
				delta("gemini-2.5-flash", map[string]any{"role": "assistant", "content": "hi"}, "stop",
					map[string]any{"usage": map[string]any{"prompt_tokens": 45, "completion_tokens": 12, "total_tokens": 389}}),
			)},
			rows: []costRow{{input: 45, output: 344, reasoning: 332, cost: 873_500, status: "ok"}},
		},
		{
			// source: Groq repeats x_groq.usage in a trailing usage chunk
			// (vercel/ai#1651, Portkey-AI/gateway#1338); priced from the built-in table
			name: "groq usage once", provider: "groq", model: "llama-3.3-70b-versatile",
			replies: []scripted.Reply{sseChunks(
				delta("llama-3.3-70b-versatile", map[string]any{"role": "assistant", "content": "hi"}, nil, nil),
				delta("llama-3.3-70b-versatile", map[string]any{}, "stop",
					map[string]any{"x_groq": map[string]any{"usage": map[string]any{"prompt_tokens": 48, "completion_tokens": 9, "total_tokens": 57}}}),
				usageChunk("llama-3.3-70b-versatile", map[string]any{"prompt_tokens": 48, "completion_tokens": 9, "total_tokens": 57}),
			)},
			rows: []costRow{{input: 48, output: 9, cost: 35_430, status: "ok"}},
		},
		{
			// source: OpenRouter's mid-stream error chunk after usage
			// (openrouter.ai/docs/api-reference/streaming); the failed attempt is billed
			name: "openrouter failed attempt billed", provider: "openrouter", model: "deepseek/deepseek-r1",
			replies: []scripted.Reply{
				sseChunks(
					delta("deepseek/deepseek-r1", map[string]any{"role": "assistant", "content": "h"}, nil, nil),
					delta("deepseek/deepseek-r1", map[string]any{"content": ""}, "error", map[string]any{
						"error": map[string]any{"code": "server_error", "message": "Provider disconnected unexpectedly"},
						"usage": map[string]any{"prompt_tokens": 850, "completion_tokens": 37, "total_tokens": 887}}),
				),
				sseChunks(
					delta("deepseek/deepseek-r1", map[string]any{"role": "assistant", "content": "hi"}, "stop", nil),
					usageChunk("deepseek/deepseek-r1", map[string]any{"prompt_tokens": 850, "completion_tokens": 14, "total_tokens": 864}),
				),
			},
			rows: []costRow{
				{input: 850, output: 37, cost: 414_000, status: "error", class: "server_error"},
				{input: 850, output: 14, cost: 368_000, status: "ok"},
			},
		},
	}
	prices := map[string]config.Price{
		"grok-4-0709":          {Input: 3, Output: 15, CacheRead: 0.75},
		"gemini-2.5-flash":     {Input: 0.30, Output: 2.50, CacheRead: 0.03},
		"deepseek/deepseek-r1": {Input: 0.40, Output: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			h := Start(t, func(*scripted.Request) scripted.Reply {
				i := int(n.Add(1)) - 1
				return tc.replies[min(i, len(tc.replies)-1)]
			}, WithClickHouse(t), withConfig(func(c *config.Config) {
				c.Primary = config.Provider{Provider: tc.provider, Model: tc.model, BaseURL: c.Primary.BaseURL, APIKey: "sk-e2e-cost-0123456789"}
				// the replay server is on loopback: use the provider's own profile
				c.Providers = map[string]config.ProviderProfile{tc.provider: {Profile: tc.provider}}
				c.Pricing = prices
			}))
			task := NewTask("say hi")
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
			require.Equal(t, "hi", res.FinalResponse)
			waitStreamEmpty(t, h, bus.StreamUsage)

			got := usageRows(t, h, task.SessionID)
			require.Len(t, got, len(tc.rows), "one row per attempt")
			pricer := gateway.NewPricer(prices)
			var total uint64
			for i, want := range tc.rows {
				row := got[i]
				require.Equal(t, tc.model, row.model)
				require.Equal(t, [5]uint64{want.input, want.output, want.cacheRead, want.cacheWrite, want.reasoning},
					[5]uint64{row.input, row.output, row.cacheRead, row.cacheWrite, row.reasoning}, "tokens by class, attempt %d", i+1)
				require.Equal(t, want.status, row.status)
				require.Equal(t, want.class, row.class)
				p, _ := pricer.Lookup(row.model)
				fromRow := uint64(math.Round(1000 * (float64(row.input)*p.Input + float64(row.output)*p.Output +
					float64(row.cacheRead)*p.CacheRead + float64(row.cacheWrite)*p.CacheWrite)))
				require.Equal(t, fromRow, row.cost, "attempt %d: cost from its row and the price table alone", i+1)
				require.Equal(t, want.cost, row.cost, "attempt %d: the provider's own figure", i+1)
				total += row.cost
			}
			requireSameUSD(t, total, res.CostUSD, "the result's cost is the rows' sum")
		})
	}
}

func usageRows(t *testing.T, h *H, sid string) []costRow {
	t.Helper()
	conn := openClickHouse(t, h.Config.ClickHouseDSN)
	rows, err := conn.Query(context.Background(), "SELECT model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "+
		"reasoning_tokens, cost_nano_usd, status, error_class FROM usage_events WHERE session_id = ? ORDER BY attempt", sid)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var out []costRow
	for rows.Next() {
		var r costRow
		require.NoError(t, rows.Scan(&r.model, &r.input, &r.output, &r.cacheRead, &r.cacheWrite, &r.reasoning, &r.cost, &r.status, &r.class))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}
