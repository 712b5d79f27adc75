package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// secretKey must never reach a span.
const secretKey = "sk-telemetry-test-key-that-must-not-leak"

// tracedScript writes a file, reads it back, notes it in memory (the memory
// service's tool) and answers. The first attempt of every step fails with
// 500 (retried on the same provider), except the second step, which the
// primary model m answers with 503 overloaded every time: it is retried
// twice (three attempts, gateway.OverloadedAttempts) and then served by the
// fallback, which keeps the rest of the turn.
func tracedScript() scripted.Script {
	steps := scripted.Conversation(
		scripted.Tool("write_file", `{"path":"traced.txt","content":"seen from outside"}`),
		scripted.Tool("read_file", `{"path":"traced.txt"}`),
		scripted.Tool("memory", `{"action":"add","target":"memory","content":"traced.txt holds a note"}`),
		scripted.Text("the file says: seen from outside"),
	)
	var mu sync.Mutex
	failed := map[int]bool{}
	return func(r *scripted.Request) scripted.Reply {
		step := r.AssistantCount()
		mu.Lock()
		first := !failed[step]
		failed[step] = true
		mu.Unlock()
		switch {
		case step == 1 && r.Model != "backup": // the primary, whatever its name, is overloaded
			return scripted.Reply{Status: 503, Body: `{"error":{"message":"overloaded, try again"}}`}
		case first:
			return scripted.Reply{Status: 500, Body: `{"error":{"message":"internal error"}}`}
		}
		return steps(r)
	}
}

// telemetryCluster runs each service as its own `herald serve` process,
// every one exporting spans to col (the tool runner over gRPC, the rest over
// HTTP) and serving /metrics; it returns the metrics addresses.
func telemetryCluster(t *testing.T, col *collector, model *scripted.Server, workspace string) (*cluster, []string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, cfg, "retry: {base_delay: 10ms, max_delay: 50ms}\n"+
		"fallback_providers: [{provider: openai, model: backup, base_url: \""+model.URL+"\"}]\n"+
		"pricing: {m: {input: 1, output: 2}, backup: {input: 1, output: 2}}\n"+
		// a window the session's first call alerts (herald_budget_alerts_total) and never fills
		"budgets: {tenants: {default: {daily: 1000}}, alert_thresholds: [0.0000001]}\n")
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"HERALD_API_KEY": secretKey, "HERALD_WORKSPACE": workspace, "HERALD_DATA_DIR": t.TempDir(),
		"HERALD_CONFIG": cfg, "OTEL_EXPORTER_OTLP_ENDPOINT": col.HTTP, "OTEL_BSP_SCHEDULE_DELAY": "100"})
	var addrs []string
	for _, names := range [][]string{{"loop"}, {"gateway"}, {"toolrunner"}, {"memory", "compressor"}} {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		addrs = append(addrs, addr)
		if names[0] == "toolrunner" {
			c.env["OTEL_EXPORTER_OTLP_PROTOCOL"], c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "grpc", col.GRPC
		}
		c.serve(append(names, "--metrics", addr)...)
		delete(c.env, "OTEL_EXPORTER_OTLP_PROTOCOL")
		c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = col.HTTP
	}
	return c, addrs
}

func TestOneSessionIsOneTraceAcrossServiceProcesses(t *testing.T) {
	col := startCollector(t)
	model, err := scripted.Start(tracedScript())
	require.NoError(t, err)
	defer model.Close()
	workspace := t.TempDir()
	c, _ := telemetryCluster(t, col, model, workspace)
	task := NewTask("write traced.txt, read it back and tell me what it says")
	submit(t, c, task)
	res := waitResult(t, c, task, 60*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)

	var trace []span
	require.Eventually(t, func() bool {
		trace = sessionTrace(col.spans(t), task.SessionID)
		return len(chats(trace)) == 4 && len(named(trace, "execute_tool write_file")) == 1 &&
			len(named(trace, "execute_tool read_file")) == 1 && len(named(trace, "execute_tool memory")) == 1
	}, 30*time.Second, 100*time.Millisecond, "the session's spans never all arrived")

	byID := map[string]span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	var roots []span
	for _, s := range trace {
		if s.ParentSpanID == "" {
			roots = append(roots, s)
			continue
		}
		_, ok := byID[s.ParentSpanID]
		require.True(t, ok, "span %q (%s) hangs under a span that is not in the trace", s.Name, s.Service)
	}
	require.Len(t, roots, 1, "one tree")
	root := roots[0]
	require.Equal(t, "invoke_agent herald", root.Name)
	require.Equal(t, "herald-loop", root.Service)
	require.Equal(t, task.SessionID, root.Attrs["gen_ai.conversation.id"])
	require.Equal(t, "text_response", root.Attrs["herald.exit_reason"])

	finishes, fallbacks := map[string]int{}, 0
	for _, chat := range chats(trace) {
		require.Equal(t, "chat m", chat.Name, "named after the model the loop asked for")
		require.Equal(t, "herald-gateway", chat.Service)
		require.Equal(t, root.SpanID, chat.ParentSpanID, "a model call hangs under its turn")
		require.Equal(t, "chat", chat.Attrs["gen_ai.operation.name"])
		require.Equal(t, "openai", chat.Attrs["gen_ai.provider.name"])
		require.Positive(t, chat.Attrs["gen_ai.usage.input_tokens"])
		require.Positive(t, chat.Attrs["gen_ai.usage.output_tokens"])
		require.GreaterOrEqual(t, chat.Attrs["herald.attempts"], int64(2), "the failed attempts and the answer are one call")
		require.NotEmpty(t, chat.Events, "each call's failed first attempt is marked: a retry or a fallback")
		require.NotContains(t, chat.Attrs, "gen_ai.input.messages", "contents are recorded only when asked for")
		finishes[fmt.Sprint(chat.Attrs["gen_ai.response.finish_reasons"])]++
		if slices.Contains(chat.Events, "fallback") {
			fallbacks++
			require.Equal(t, "backup", chat.Attrs["gen_ai.response.model"])
			require.Equal(t, true, chat.Attrs["herald.is_fallback"])
			require.Equal(t, []string{"retry", "retry", "fallback"}, chat.Events, "the overloaded primary is retried twice, then left")
			require.Equal(t, int64(4), chat.Attrs["herald.attempts"], "three attempts on the primary, one on the fallback")
		}
	}
	require.Equal(t, map[string]int{"[tool_calls]": 3, "[stop]": 1}, finishes)
	require.Equal(t, 1, fallbacks, "the refused step moved to the fallback")
	for _, name := range []string{"execute_tool write_file", "execute_tool read_file"} {
		tool := named(trace, name)[0]
		require.Equal(t, "herald-toolrunner", tool.Service, "exported over gRPC")
		require.Equal(t, root.SpanID, tool.ParentSpanID)
		require.Equal(t, "ok", tool.Attrs["herald.tool.status"])
		require.NotContains(t, tool.Attrs, "gen_ai.tool.call.arguments")
	}
	memory := named(trace, "execute_tool memory")[0]
	require.Equal(t, "herald-compressor-memory", memory.Service, "the memory service's own process")
	require.Equal(t, root.SpanID, memory.ParentSpanID)
	require.NotContains(t, col.raw(t), secretKey, "no key reaches a span")
	require.NotContains(t, col.raw(t), "seen from outside", "no message content without the opt-in")
}

// sessionTrace is every span of the trace whose turn span belongs to sid.
func sessionTrace(all []span, sid string) []span {
	var tid string
	for _, s := range all {
		if strings.HasPrefix(s.Name, "invoke_agent") && s.Attrs["gen_ai.conversation.id"] == sid {
			tid = s.TraceID
		}
	}
	var out []span
	for _, s := range all {
		if tid != "" && s.TraceID == tid {
			out = append(out, s)
		}
	}
	return out
}

// chats are the model-call spans, named after the model the loop asked for.
func chats(spans []span) []span {
	var out []span
	for _, s := range spans {
		if s.Attrs["gen_ai.operation.name"] == "chat" {
			out = append(out, s)
		}
	}
	return out
}

func named(spans []span, name string) []span {
	var out []span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// scrape reads a process's /metrics.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// The operations dashboard's every query names metrics (and labels) that a
// real scrape of the service processes has after a session ran.
func TestOperationsDashboardQueriesMatchARealScrape(t *testing.T) {
	col := startCollector(t)
	model, err := scripted.Start(tracedScript())
	require.NoError(t, err)
	defer model.Close()
	c, addrs := telemetryCluster(t, col, model, t.TempDir())
	task := NewTask("write traced.txt, read it back and tell me what it says")
	submit(t, c, task)
	require.Equal(t, proto.ExitTextResponse, waitResult(t, c, task, 60*time.Second).ExitReason)
	require.NoError(t, c.NC.Publish("herald.tasks", []byte("not a task"))) // dead-lettered by the loop

	var scraped promScrape
	var texts []string
	require.Eventually(t, func() bool {
		scraped, texts = promScrape{}, nil
		for _, addr := range addrs {
			texts = append(texts, scrape(t, addr))
			scraped.add(texts[len(texts)-1])
		}
		return scraped.has("herald_dead_letters_total", "stream", "TASKS") &&
			scraped.has("herald_trace_spans_exported_total", "", "")
	}, 30*time.Second, 200*time.Millisecond, "the scrapes never showed the dead letter")
	require.True(t, scraped.has("herald_model_calls_total", "status", "error"), "the failed attempts are counted")
	require.True(t, scraped.has("herald_model_fallbacks_total", "error_class", "overloaded"))
	require.True(t, scraped.has("herald_tool_runs_total", "tool", "write_file"))
	require.True(t, scraped.has("herald_tool_context_cost_usd_total", "tool", "write_file"), "the later calls paid to carry its result")
	require.Equal(t, 1.0, sample(texts, `herald_tool_runs_total{status="ok",tool="write_file"}`))
	require.Equal(t, 1.0, sample(texts, "herald_turns_started_total"))
	require.Equal(t, 1.0, sample(texts, `herald_turns_finished_total{exit_reason="text_response"}`))
	require.Equal(t, 0.0, sample(texts, "herald_sessions_active"), "the session's turn is over")
	require.Equal(t, 3.0, sample(texts, `herald_model_retries_total{error_class="server_error",provider="openai"}`))
	require.Equal(t, 2.0, sample(texts, `herald_model_retries_total{error_class="overloaded",provider="openai"}`))
	require.Equal(t, 1.0, sample(texts, `herald_model_fallbacks_total{error_class="overloaded",provider="openai"}`))
	require.Equal(t, 1.0, sample(texts, `herald_dead_letters_total{stream="TASKS"}`))
	require.Positive(t, sample(texts, `herald_spend_usd_total{tenant="default"}`))
	require.Equal(t, 1.0, sample(texts, `herald_budget_alerts_total{id="default",scope="tenant",tenant="default",threshold="0.0000001",window="daily"}`))

	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "grafana", "herald-operations.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	require.NotEmpty(t, dash.Panels)
	var later []string
	for _, addr := range addrs {
		later = append(later, scrape(t, addr))
	}
	queries := map[string]string{}
	for _, p := range dash.Panels {
		for i, target := range p.Targets {
			// Grafana's $__rate_interval: two scrapes' worth here
			queries[fmt.Sprintf("%s #%d", p.Title, i)] = strings.ReplaceAll(target.Expr, "$__rate_interval", "2m")
		}
	}
	evalPanels(t, texts, later, queries)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			require.NotEmpty(t, names, "panel %q: %s names no herald metric", p.Title, target.Expr)
			for _, name := range names {
				labels, ok := scraped.series[name]
				require.True(t, ok, "panel %q: %s is not in the scrape", p.Title, name)
				for _, by := range groupLabels(target.Expr) {
					require.True(t, by == "le" || labels[by], "panel %q: %s has no label %q", p.Title, name, by)
				}
			}
		}
	}
}

var (
	metricName = regexp.MustCompile(`\bherald_[a-z0-9_]+`)
	byClause   = regexp.MustCompile(`\bby \(([^)]*)\)`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func groupLabels(expr string) []string {
	var out []string
	for _, m := range byClause.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// promScrape is the series of Prometheus text scrapes: each metric's label
// names, and its label values.
type promScrape struct {
	series map[string]map[string]bool
	values map[string]map[string]bool // metric -> "label=value"
}

func (p *promScrape) add(text string) {
	if p.series == nil {
		p.series, p.values = map[string]map[string]bool{}, map[string]map[string]bool{}
	}
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		if p.series[m[1]] == nil {
			p.series[m[1]], p.values[m[1]] = map[string]bool{}, map[string]bool{}
		}
		for _, kv := range labelPair.FindAllStringSubmatch(m[2], -1) {
			p.series[m[1]][kv[1]] = true
			p.values[m[1]][kv[1]+"="+kv[2]] = true
		}
	}
}

// has says whether metric was scraped, with label=value when label is set.
func (p *promScrape) has(metric, label, value string) bool {
	if _, ok := p.series[metric]; !ok {
		return false
	}
	return label == "" || p.values[metric][label+"="+value]
}

// sample is the sum of one series over the scrapes (0 when absent).
func sample(texts []string, series string) float64 {
	var sum float64
	for _, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				var f float64
				if _, err := fmt.Sscan(v, &f); err == nil {
					sum += f
				}
			}
		}
	}
	return sum
}

// A loop process killed mid-turn loses nothing of the trace either: the
// loop that finishes the turn records its span with the ids chosen when it
// started, so every span hangs in one tree.
func TestTraceStaysOneTreeWhenTheLoopThatStartedTheTurnIsKilled(t *testing.T) {
	col := startCollector(t)
	model, err := scripted.Start(durableScript(nil))
	require.NoError(t, err)
	defer model.Close()
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m",
		"HERALD_WORKSPACE": t.TempDir(), "HERALD_DATA_DIR": t.TempDir(),
		"OTEL_EXPORTER_OTLP_ENDPOINT": col.HTTP, "OTEL_BSP_SCHEDULE_DELAY": "100"})
	c.serve("gateway", "toolrunner", "memory", "compressor")
	first := c.serve("loop")
	task := NewTask("durable task")
	killed := make(chan struct{})
	onEvent(t, c, task.SessionID, func(ev proto.Event) bool { return ev.Type == proto.EventToolStarted && ev.Tool == "terminal" },
		func() { first.kill9(); close(killed) })
	submit(t, c, task)
	select {
	case <-killed:
	case <-time.After(60 * time.Second):
		t.Fatal("the kill point was never reached")
	}
	c.serve("loop")
	require.Equal(t, proto.ExitTextResponse, waitResult(t, c, task, 90*time.Second).ExitReason)

	var trace []span
	require.Eventually(t, func() bool {
		trace = sessionTrace(col.spans(t), task.SessionID)
		return len(chats(trace)) == 5 && len(named(trace, "execute_tool terminal")) >= 2
	}, 30*time.Second, 100*time.Millisecond, "the session's spans never all arrived")
	byID := map[string]span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	roots := 0
	for _, s := range trace {
		if s.ParentSpanID == "" {
			roots++
			require.Equal(t, "invoke_agent herald", s.Name)
			continue
		}
		_, ok := byID[s.ParentSpanID]
		require.True(t, ok, "span %q hangs outside the tree", s.Name)
	}
	require.Equal(t, 1, roots)
}
