package gateway

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// conformancePrices is this suite's own price table (USD per million
// tokens), given to the gateway as configured prices. Expected costs are
// computed from it and the fixture's token counts, never read back from
// what the gateway reports.
var conformancePrices = map[string]config.Price{
	"gpt-4o-mini":                 {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"o4-mini":                     {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	"gpt-5-mini":                  {Input: 0.25, Output: 2, CacheRead: 0.025},
	"claude-sonnet-4-5":           {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-3-haiku-20240307":     {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.30},
	"claude-haiku-4-5":            {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25, Fees: map[string]float64{"web_search": 0.01}},
	"claude-opus-4-1":             {Input: 15, Output: 75, CacheRead: 1.50, CacheWrite: 18.75},
	"anthropic/claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheRead: 0.03, CacheWrite: 0.30},
	"anthropic/claude-sonnet-4.5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"deepseek/deepseek-r1":        {Input: 0.40, Output: 2},
	"llama-3.3-70b-versatile":     {Input: 0.59, Output: 0.79},
	"openai/gpt-oss-120b":         {Input: 0.15, Output: 0.75},
	"grok-4-0709":                 {Input: 3, Output: 15, CacheRead: 0.75},
	"grok-3-mini":                 {Input: 0.30, Output: 0.50, CacheRead: 0.075},
	"deepseek-reasoner":           {Input: 0.28, Output: 0.42, CacheRead: 0.028},
	"deepseek-chat":               {Input: 0.28, Output: 0.42, CacheRead: 0.028},
	"magistral-medium-2509":       {Input: 2, Output: 5},
	"mistral-large-latest":        {Input: 2, Output: 6},
	"gemini-2.5-flash":            {Input: 0.30, Output: 2.50, CacheRead: 0.03},
	"gemini-2.5-pro": {Input: 1.25, Output: 10, CacheRead: 0.125,
		Tiers: []pricing.Tier{{AboveInputTokens: 200_000, Input: ptr(2.50), Output: ptr(15), CacheRead: ptr(0.25)}}},
	"sonar":                         {Input: 1, Output: 1, Fees: map[string]float64{"search_context_low": 0.005, "search_context_medium": 0.008}},
	"deepseek-ai/DeepSeek-R1":       {Input: 3, Output: 7},
	"Qwen/Qwen3-235B-A22B-fp8-tput": {Input: 0.20, Output: 0.60},
	"accounts/fireworks/models/llama-v3p1-70b-instruct": {Input: 0.90, Output: 0.90},
	"accounts/fireworks/models/deepseek-r1":             {Input: 3, Output: 8},
}

func ptr(v float64) *float64 { return &v }

const conformanceKey = "sk-conformance-0123456789abcdef"

// conformanceCase is one fixture of testdata/conformance: what a provider
// sent (one reply per attempt) and what Herald must make of it.
type conformanceCase struct {
	file     string
	fields   map[string][]string
	replies  []scripted.Reply
	provider string
	model    string
	mode     string
	stream   bool
}

func (c *conformanceCase) get(key string) string {
	if v := c.fields[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (c *conformanceCase) has(key string) bool { _, ok := c.fields[key]; return ok }

// loadCase reads a fixture: `key: value` lines (a key may repeat), then
// one or more `--- reply STATUS [CONTENT-TYPE]` sections whose bodies are
// sent byte for byte.
func loadCase(t *testing.T, path string) *conformanceCase {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	c := &conformanceCase{file: filepath.Base(path), fields: map[string][]string{}}
	head, rest, _ := strings.Cut(string(data), "\n--- reply ")
	sc := bufio.NewScanner(strings.NewReader(head))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		require.True(t, ok, "%s: header line %q is not key: value", c.file, line)
		c.fields[strings.TrimSpace(k)] = append(c.fields[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	for _, section := range strings.Split(rest, "\n--- reply ") {
		line, body, _ := strings.Cut(section, "\n")
		words := strings.Fields(line)
		require.NotEmpty(t, words, "%s: reply without a status", c.file)
		status, err := strconv.Atoi(words[0])
		require.NoError(t, err, c.file)
		if status == 200 {
			r := scripted.Reply{Raw: body, ContentType: "application/json"}
			if len(words) > 1 {
				r.ContentType = words[1]
			}
			if strings.Contains(r.ContentType, "event-stream") && !strings.HasSuffix(r.Raw, "\n\n") {
				r.Raw += "\n" // the section split took the blank line ending the last event
			}
			c.replies = append(c.replies, r)
			continue
		}
		reply := scripted.Reply{Status: status, Header: map[string]string{}}
		for strings.HasPrefix(body, "> ") { // response headers: "> Name: value" lines
			line, rest, _ := strings.Cut(body, "\n")
			name, value, _ := strings.Cut(strings.TrimPrefix(line, "> "), ":")
			reply.Header[strings.TrimSpace(name)] = strings.TrimSpace(value)
			body = rest
		}
		reply.Body = strings.TrimSpace(body)
		c.replies = append(c.replies, reply)
	}
	c.provider, c.model, c.mode = c.get("provider"), c.get("model"), c.get("mode")
	c.stream = c.get("stream") == "true"
	require.NotEmpty(t, c.get("source"), "%s names no source for its facts", c.file)
	require.NotEmpty(t, c.provider, c.file)
	require.NotEmpty(t, c.model, c.file)
	require.Contains(t, []string{ModeChatCompletions, ModeCodexResponses, ModeAnthropicMessages}, c.mode, c.file)
	return c
}

// replay answers the n-th request with the n-th reply (the last one again
// past the end).
func (c *conformanceCase) replay() scripted.Script {
	var n atomic.Int64
	return func(*scripted.Request) scripted.Reply {
		i := int(n.Add(1)) - 1
		return c.replies[min(i, len(c.replies)-1)]
	}
}

// overrides: the profile is the provider's own, as at its real host (the
// replay server is on loopback), plus the fixture's override.* fields.
func (c *conformanceCase) overrides() map[string]config.ProviderProfile {
	o := config.ProviderProfile{Profile: c.provider}
	if v := c.get("override.stream"); v != "" {
		b := v == "true"
		o.Stream = &b
	}
	if v := c.get("override.think_tags"); v != "" {
		b := v == "true"
		o.ThinkTags = &b
	}
	o.Usage = c.get("override.usage")
	return map[string]config.ProviderProfile{c.provider: o}
}

// TestConformance replays every fixture over real HTTP through a gateway on
// a real bus and checks what a user would see and pay.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob("testdata/conformance/*.case")
	require.NoError(t, err)
	providers, modes, streamed, errs := map[string]bool{}, map[string]bool{}, map[bool]bool{}, 0
	for _, f := range files {
		c := loadCase(t, f)
		providers[c.provider], modes[c.mode], streamed[c.stream] = true, true, true
		if c.has("error_class") {
			errs++
		}
		t.Run(strings.TrimSuffix(c.file, ".case"), func(t *testing.T) { runConformance(t, c) })
	}
	require.GreaterOrEqual(t, len(files), 40, "the suite covers at least 40 cases")
	require.GreaterOrEqual(t, len(providers), 12, "providers: %v", providers)
	require.Len(t, modes, 3, "every API mode")
	require.Len(t, streamed, 2, "streamed and whole answers")
	require.GreaterOrEqual(t, errs, 8, "errors are part of the suite")
}

func runConformance(t *testing.T, c *conformanceCase) {
	r := newRig(t, c.replay(), func(cfg *Config) {
		cfg.Primary = config.Provider{Provider: c.provider, Model: c.model, BaseURL: cfg.Primary.BaseURL,
			APIMode: c.mode, APIKey: conformanceKey}
		cfg.Pricing = conformancePrices
		cfg.Profiles = c.overrides()
		if fb := c.get("fallback"); fb != "" { // the same provider's other model, served by the same replay
			cfg.Fallbacks = []config.Provider{{Provider: c.provider, Model: fb, BaseURL: cfg.Primary.BaseURL,
				APIMode: c.mode, APIKey: conformanceKey}}
		}
	})
	ev := r.watch("conf")
	req := conformanceRequest(r, c)
	resp := r.call(req)

	checkOutcome(t, c, resp)
	checkUsageAndCost(t, c, r, resp)
	checkWire(t, c, r)
	if w := c.get("retry_wait"); w != "" {
		retries := ev.ofType(proto.EventRetry)
		require.NotEmpty(t, retries)
		require.Contains(t, retries[0].Message, "retrying in "+w+" ", "the retry waits the provider's delay and no longer")
	}
	if c.stream && !c.has("error_class") {
		// a retried attempt streams the answer anew after what the failed one showed
		require.Eventually(t, func() bool { return strings.HasSuffix(ev.text(), resp.GetMessage().GetContent()) }, 5*time.Second, 5*time.Millisecond,
			"the streamed text is the answer, and only the answer")
		if resp.GetAttempts() == 1 {
			require.Equal(t, resp.GetMessage().GetContent(), ev.text())
		}
		if reasoning := resp.GetMessage().GetReasoning(); reasoning != "" {
			require.NotContains(t, ev.text(), reasoning, "reasoning is never streamed as the answer")
		}
	}
}

// conformanceRequest is one tool round in: an assistant that reasoned and
// called a tool, and the tool's result, so echoes and ids travel both ways.
func conformanceRequest(r *rig, c *conformanceCase) *heraldpb.LLMRequest {
	req := r.request("conf", "What is in the notes?")
	req.Stream = c.stream
	if v := c.get("max_output_tokens"); v != "" {
		n, _ := strconv.Atoi(v)
		req.MaxOutputTokens = int32(n)
	}
	if effort, budget := c.get("reasoning_effort"), c.get("reasoning_budget"); effort != "" || budget != "" {
		n, _ := strconv.ParseInt(budget, 10, 64)
		req.Reasoning = &heraldpb.Reasoning{Effort: effort, BudgetTokens: n, Summary: c.get("reasoning_summary")}
	}
	req.Messages = append(req.Messages,
		&heraldpb.ChatMessage{Role: "assistant", Content: "Let me look.", Reasoning: "The notes are in notes.txt.",
			ReasoningItems: earlierReasoning,
			ToolCalls:      []*heraldpb.ToolCall{{Id: "call_prev_1", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
		&heraldpb.ChatMessage{Role: "tool", ToolCallId: "call_prev_1", Name: "read_file", Content: "buy green tea"},
	)
	req.Tools = []*heraldpb.ToolSpec{
		{Name: "read_file", Description: "Read a file", ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`},
		{Name: "terminal", Description: "Run a command", ParametersJson: `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`},
	}
	return req
}

// earlierReasoning are the provider records of the earlier tool round's
// reasoning, one per API mode that keeps them: each goes back only to its
// own mode, unchanged. Their signatures and encrypted content are this
// suite's own strings in the shape the providers document
// (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks,
// https://platform.openai.com/docs/guides/reasoning#encrypted-reasoning-items).
var earlierReasoning = []*heraldpb.ReasoningItem{
	{ApiMode: ModeAnthropicMessages, Json: `{"type":"thinking","thinking":"The notes are in notes.txt.","signature":"ErUBCkYIBxgCIkCdHeraldPrevSig+/0123456789=="}`},
	{ApiMode: ModeAnthropicMessages, Json: `{"type":"redacted_thinking","data":"EmwKAhgBEgy3HeraldRedacted+/=="}`},
	{ApiMode: ModeCodexResponses, Json: `{"id":"rs_prev_1","type":"reasoning","summary":[{"type":"summary_text","text":"The notes are in notes.txt."}],"encrypted_content":"gAAAAABoHeraldPrevEncrypted=="}`},
}

func checkOutcome(t *testing.T, c *conformanceCase, resp *heraldpb.LLMResponse) {
	require.NotContains(t, resp.GetError(), conformanceKey, "a key never reaches an error")
	require.Equal(t, c.has("fallback"), resp.GetIsFallback(), "served by the fallback")
	if n := c.get("attempts"); n != "" {
		require.Equal(t, n, strconv.Itoa(int(resp.GetAttempts())), "attempts")
	}
	if class := c.get("error_class"); class != "" {
		require.Equal(t, class, resp.GetErrorClass(), "error: %s", resp.GetError())
		require.Contains(t, resp.GetError(), c.get("error_contains"), "the provider's own words")
		return
	}
	require.Empty(t, resp.GetError())
	msg := resp.GetMessage()
	require.Equal(t, unquote(t, c.get("content")), msg.GetContent(), "answer text")
	require.Equal(t, unquote(t, c.get("reasoning")), msg.GetReasoning(), "reasoning, kept apart")
	if f := c.get("finish_reason"); f != "" {
		require.Equal(t, f, resp.GetFinishReason())
	}
	var want []struct{ ID, Name, Arguments string }
	if v := c.get("tool_calls"); v != "" {
		require.NoError(t, json.Unmarshal([]byte(v), &want), c.file)
	}
	items := c.fields["reasoning_item"]
	require.Len(t, msg.GetReasoningItems(), len(items), "provider reasoning records kept: %v", msg.GetReasoningItems())
	for i, w := range items {
		require.Equal(t, c.mode, msg.GetReasoningItems()[i].GetApiMode())
		require.JSONEq(t, w, msg.GetReasoningItems()[i].GetJson(), "reasoning record %d, as the provider sent it", i)
	}
	require.Len(t, msg.GetToolCalls(), len(want), "tool calls")
	for i, w := range want {
		got := msg.GetToolCalls()[i]
		if w.ID == "synthetic" {
			require.Regexp(t, `^call_[0-9a-f]{12}_`+strconv.Itoa(i)+`$`, got.GetId(), "an empty id gets a stable one")
		} else {
			require.Equal(t, w.ID, got.GetId())
		}
		require.Equal(t, w.Name, got.GetName())
		require.JSONEq(t, w.Arguments, got.GetArguments())
	}
}

// checkUsageAndCost: one usage event per attempt, each with the fixture's
// token classes, each priced from its own row and the price table alone,
// and the call's total cost equal to the sum to the nano-dollar.
func checkUsageAndCost(t *testing.T, c *conformanceCase, r *rig, resp *heraldpb.LLMResponse) {
	wants := c.fields["usage"]
	require.NotEmpty(t, wants, "%s: no expected usage", c.file)
	var events []*heraldpb.UsageEvent
	require.Eventually(t, func() bool { events = r.usageEvents(); return len(events) == len(wants) }, 5*time.Second, 5*time.Millisecond,
		"one usage event per attempt")
	sort.Slice(events, func(i, j int) bool { return events[i].GetAttempt() < events[j].GetAttempt() })
	total, totalNano := &heraldpb.Usage{}, uint64(0)
	for i, w := range wants {
		model, want := c.model, parseUsage(t, w)
		if m, ok := usageModel(w); ok {
			model = m
		}
		ev := events[i]
		require.Equal(t, want, stripUsage(ev.GetUsage()), "usage of attempt %d", i+1)
		require.Equal(t, model, ev.GetModel(), "the model attempt %d asked", i+1)
		nano := expectedNano(model, want)
		if costs := c.fields["cost_nano"]; len(costs) > 0 { // tiers and fees: worked out by hand in the fixture
			n, err := strconv.ParseUint(costs[i], 10, 64)
			require.NoError(t, err)
			nano = n
		}
		require.Equal(t, nano, ev.GetCostNanoUsd(), "cost of attempt %d from its row and the price table", i+1)
		if sources := c.fields["price_source"]; len(sources) > 0 {
			require.Equal(t, sources[i], ev.GetPriceSource(), "what priced attempt %d", i+1)
			again, err := pricing.Reprice(conformancePrices[c.model], ev.GetUsage(), ev.GetPriceSource())
			require.NoError(t, err)
			require.Equal(t, nano, again, "the row and the table alone give its cost again")
		} else if _, priced := conformancePrices[model]; priced {
			require.Equal(t, PriceConfig, ev.GetPriceSource())
		} else {
			require.Equal(t, PriceUnknown, ev.GetPriceSource(), "no guessed price")
		}
		addUsage(total, want)
		totalNano += nano
	}
	require.Equal(t, total, stripUsage(resp.GetUsage()), "the call's usage is the sum of its attempts")
	require.Equal(t, float64(totalNano)/nanoPerUSD, resp.GetCostUsd())
	if v := c.get("provider_cost_nano"); v != "" {
		require.Equal(t, v, strconv.FormatUint(totalNano, 10), "Herald's cost equals the provider's own")
	}
	if p := c.get("prompt_tokens"); p != "" {
		require.Equal(t, p, strconv.FormatInt(resp.GetPromptTokens(), 10), "prompt tokens as the provider counts them")
	}
}

// expectedNano prices u from the suite's table: USD per million tokens is
// nano-USD per thousand.
func expectedNano(model string, u *heraldpb.Usage) uint64 {
	p, ok := conformancePrices[model]
	if !ok {
		return 0
	}
	usd := float64(u.GetInputTokens())*p.Input + float64(u.GetOutputTokens())*p.Output +
		float64(u.GetCacheReadTokens())*p.CacheRead + float64(u.GetCacheWriteTokens())*p.CacheWrite
	return uint64(math.Round(usd * 1000))
}

// parseUsage reads "input=1 output=2 cache_read=3 cache_write=4 reasoning=5"
// (and skips "model=NAME": usageModel).
func parseUsage(t *testing.T, s string) *heraldpb.Usage {
	u := &heraldpb.Usage{}
	dst := map[string]*int64{"input": &u.InputTokens, "output": &u.OutputTokens, "cache_read": &u.CacheReadTokens,
		"cache_write": &u.CacheWriteTokens, "reasoning": &u.ReasoningTokens}
	for _, kv := range strings.Fields(s) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "model" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, s)
		require.Contains(t, dst, k, s)
		*dst[k] = n
	}
	return u
}

// usageModel is the model a usage line names (model=NAME: an attempt on
// the fallback), if it names one.
func usageModel(s string) (string, bool) {
	for _, kv := range strings.Fields(s) {
		if k, v, _ := strings.Cut(kv, "="); k == "model" {
			return v, true
		}
	}
	return "", false
}

// checkWire checks what the gateway sent: request_has PATH[=JSON],
// request_absent PATH, header NAME=VALUE. PATH is dot-separated; * matches
// every element of a list.
func checkWire(t *testing.T, c *conformanceCase, r *rig) {
	reqs := r.model.Requests()
	require.NotEmpty(t, reqs)
	require.Equal(t, "application/json", reqs[0].Header.Get("Content-Type"))
	var body any
	require.NoError(t, json.Unmarshal(reqs[0].Raw, &body))
	// the earlier tool round goes back with its call id, in the mode's shape
	roundTrip := map[string][]string{
		ModeChatCompletions:   {"messages.*.tool_calls.*.id", "messages.*.tool_call_id"},
		ModeAnthropicMessages: {"messages.*.content.*.id", "messages.*.content.*.tool_use_id"},
		ModeCodexResponses:    {"input.*.call_id"},
	}
	prof, err := profileFor(c.provider, "", c.overrides())
	require.NoError(t, err)
	callID := "call_prev_1"
	if prof.ToolCallIDs == IDsAlnum9 {
		callID = alnum9(callID)
		require.Regexp(t, `^[A-Za-z0-9]{9}$`, callID)
	}
	for _, path := range roundTrip[c.mode] {
		require.Contains(t, lookup(body, strings.Split(path, ".")), any(callID), "%s carries the call id", path)
	}
	for _, spec := range c.fields["request_has"] {
		path, want, hasValue := strings.Cut(spec, "=")
		got := lookup(body, strings.Split(path, "."))
		require.NotEmpty(t, got, "request lacks %s: %s", path, reqs[0].Raw)
		if hasValue {
			var w any
			require.NoError(t, json.Unmarshal([]byte(want), &w), spec)
			for _, g := range got {
				require.Equal(t, w, g, path)
			}
		}
	}
	for _, path := range c.fields["request_absent"] {
		require.Empty(t, lookup(body, strings.Split(path, ".")), "request must not send %s: %s", path, reqs[0].Raw)
	}
	for _, spec := range c.fields["header"] {
		name, want, _ := strings.Cut(spec, "=")
		require.Equal(t, want, reqs[0].Header.Get(name), name)
	}
}

func lookup(v any, path []string) []any {
	if len(path) == 0 {
		return []any{v}
	}
	switch x := v.(type) {
	case map[string]any:
		next, ok := x[path[0]]
		if !ok {
			return nil
		}
		return lookup(next, path[1:])
	case []any:
		if path[0] != "*" {
			return nil
		}
		var out []any
		for _, e := range x {
			out = append(out, lookup(e, path[1:])...)
		}
		return out
	}
	return nil
}

// unquote reads a fixture text value: a JSON string when quoted (for
// newlines), else the text itself.
func unquote(t *testing.T, s string) string {
	if strings.HasPrefix(s, `"`) {
		var out string
		require.NoError(t, json.Unmarshal([]byte(s), &out), s)
		return out
	}
	return s
}
