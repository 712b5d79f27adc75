package accounting

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// toolCostFixture: session s1 ran a big terminal call (c1) and a small
// read_file (c2); three model calls carried c1 (the first fresh, the next
// two from the cache) and two carried c2. Session s2 of another tenant
// reused the call id c1 for a terminal call carried once. e3's carried rows
// were stored once before (a sink that died between them and e3 itself).
type toolCostFixture struct {
	dsn string
	url string
}

func carriedRow(call, tool string, tokens, read int64, nano uint64) *heraldpb.CarriedResult {
	return &heraldpb.CarriedResult{CallId: call, Tool: tool, Tokens: tokens, Estimated: true,
		InputTokens: tokens - read, CacheReadTokens: read, CostNanoUsd: nano}
}

func startToolCostFixture(t *testing.T) toolCostFixture {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	svc := startService(t, b, testConfig(dsn))
	ctx := context.Background()
	now := time.Now()
	tools := []*heraldpb.ToolEvent{
		{EventId: "s1:c1", Tenant: "acme", SessionId: "s1", CallId: "c1", Tool: "terminal", DurationMs: 1200, OutputBytes: 40000},
		{EventId: "s1:c2", Tenant: "acme", SessionId: "s1", CallId: "c2", Tool: "read_file", DurationMs: 30, OutputBytes: 400},
		{EventId: "s2:c1", Tenant: "globex", SessionId: "s2", CallId: "c1", Tool: "terminal", DurationMs: 800, OutputBytes: 4000, Status: "error"},
	}
	for _, ev := range tools {
		ev.TsUnixMs = now.UnixMilli()
		require.NoError(t, bus.PublishProto(ctx, b.JS, bus.ToolEventSubject(ev.Tenant), ev.EventId, ev))
	}
	e1 := usageEvent("e1", "acme", "s1", "test-model", now, 11000, 10, 0)
	e1.Carried = []*heraldpb.CarriedResult{carriedRow("c1", "terminal", 10001, 0, 10_001_000)}
	e2 := usageEvent("e2", "acme", "s1", "test-model", now, 11200, 10, 0)
	e2.Carried = []*heraldpb.CarriedResult{carriedRow("c1", "terminal", 10001, 10001, 5_000_500), carriedRow("c2", "read_file", 101, 0, 101_000)}
	e3 := usageEvent("e3", "acme", "s1", "test-model", now, 11400, 10, 0)
	e3.Carried = []*heraldpb.CarriedResult{carriedRow("c1", "terminal", 10001, 10001, 5_000_500), carriedRow("c2", "read_file", 101, 101, 50_500)}
	e4 := usageEvent("e4", "globex", "s2", "test-model", now, 1100, 10, 0)
	e4.Carried = []*heraldpb.CarriedResult{carriedRow("c1", "terminal", 1001, 0, 1_001_000)}

	st, err := openExisting(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	n, cols := carriedKind.toColumns([]row{{id: "e3", ev: e3}})
	require.NoError(t, st.insertColumns(ctx, carriedKind.table, carriedKind.columns, n, cols))

	publishUsage(t, b.JS, "", e1, e2, e3, e4)
	waitDrained(t, b.JS, bus.StreamUsage)
	waitDrained(t, b.JS, bus.StreamToolEvents)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return toolCostFixture{dsn: dsn, url: srv.URL}
}

func TestSinkStoresWhatEachCallCarriedOnceEvenAfterACrash(t *testing.T) {
	f := startToolCostFixture(t)
	require.Equal(t, uint64(6), scalar(t, f.dsn, "SELECT count() FROM tool_context_costs"),
		"e3's rows, stored before the crash, are not stored again with e3")
	require.Equal(t, uint64(4), scalar(t, f.dsn, "SELECT count() FROM usage_events"))
	require.Equal(t, uint64(10_001_000+5_000_500+5_000_500), scalar(t, f.dsn,
		"SELECT sum(cost_nano_usd) FROM tool_context_costs WHERE session_id = 's1' AND call_id = 'c1'"))
}

func TestCostByToolShowsRunTimeSizeAndContextCost(t *testing.T) {
	f := startToolCostFixture(t)
	ctx := context.Background()
	rep, err := QueryToolCost(ctx, f.dsn, ToolCostQuery{})
	require.NoError(t, err)
	require.Len(t, rep.Rows, 2)
	term, read := rep.Rows[0], rep.Rows[1]
	require.Equal(t, ToolCostRow{Tool: "terminal", Runs: 2, Errors: 1, DurationMs: 2000, OutputBytes: 44000, Carried: 4,
		ContextTokens: 3*10001 + 1001, ContextInputTokens: 10001 + 1001, ContextCacheReadTokens: 2 * 10001,
		ContextCostNanoUSD: 10_001_000 + 2*5_000_500 + 1_001_000, ContextCostUSD: 0.021003, Estimated: true}, term,
		"e3's rows, stored before the crash, count once; the call id c1 of s2 is a call of its own")
	require.Equal(t, "read_file", read.Tool)
	require.Equal(t, uint64(101_000+50_500), read.ContextCostNanoUSD)
	require.Equal(t, term.ContextCostNanoUSD+read.ContextCostNanoUSD, rep.Total.ContextCostNanoUSD)

	one, err := QueryToolCost(ctx, f.dsn, ToolCostQuery{Session: "s1"})
	require.NoError(t, err)
	require.Equal(t, uint64(3), one.Rows[0].Carried, "only s1's calls")
	require.Equal(t, uint64(1), one.Rows[0].Runs)
	tenant, err := QueryToolCost(ctx, f.dsn, ToolCostQuery{Tenant: "globex", Since: time.Hour})
	require.NoError(t, err)
	require.Len(t, tenant.Rows, 1)
	require.Equal(t, uint64(1_001_000), tenant.Rows[0].ContextCostNanoUSD)

	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	require.Regexp(t, `(?m)^ +TOOL +runs +errors +run time +result bytes +carried +context tokens +cache read +context cost USD`, out.String())
	require.Regexp(t, `(?m)^ +terminal +2 +1 +2000 ms +44000 +4 +~31004 +~20002 +0\.021003`, out.String())
	require.Contains(t, out.String(), "~ tokens estimated as characters/4")
}

var topRow = regexp.MustCompile(`(?s)<table id="top-tool-results">.*?</table>`)

func TestDashboardShowsToolCostsAndASessionsCostliestResults(t *testing.T) {
	f := startToolCostFixture(t)
	dir := artifactsDir(t)
	dom := chromium(t, f.url+"/?range=24h", filepath.Join(dir, "dashboard-tool-costs.png"))
	require.Regexp(t, `(?s)<table id="tool-costs">.*<td class="key">terminal</td><td>2</td><td>2000 ms</td><td>44000</td><td>4</td><td>~31004</td><td>~20002</td><td class="cost" data-cost-nano-usd="21003000">`, dom)

	dom = chromium(t, f.url+"/sessions/s1", filepath.Join(dir, "dashboard-session-tool-costs.png"))
	table := topRow.FindString(dom)
	require.NotEmpty(t, table, "the session page lists its costliest tool results")
	require.Regexp(t, `(?s)<td>terminal</td><td class="key">c1</td><td>1200 ms</td><td>40000</td><td>~10001</td><td>3</td><td class="cost" data-cost-nano-usd="20002000">.*<td>read_file</td><td class="key">c2</td>`, table,
		"the terminal result first: carried three times, run time and size from its run")
	require.NotContains(t, table, "1001<", "s2's c1 is another session's")

	var d SessionDetail
	require.Equal(t, 200, getJSON(t, f.url+"/api/sessions/s1", &d))
	require.Len(t, d.TopResults, 2)
	require.Equal(t, ResultCost{SessionID: "s1", CallID: "c1", Tool: "terminal", DurationMs: 1200, OutputBytes: 40000, Carried: 3,
		Tokens: 10001, Estimated: true, CostNanoUSD: 20_002_000, CostUSD: 0.020002}, d.TopResults[0])
}

// A model names its tool calls, so a call id or tool name is untrusted
// text: the session page shows it escaped, never as markup.
func TestSessionPageEscapesAForgedCallIDAndToolName(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	svc := startService(t, b, testConfig(dsn))
	evil := `<img src=x onerror=alert(1)>`
	e := usageEvent("x1", "acme", "s-evil", "test-model", time.Now(), 5000, 10, 0)
	e.Carried = []*heraldpb.CarriedResult{carriedRow(evil, evil, 4000, 0, 4_000_000)}
	publishUsage(t, b.JS, "", e)
	waitDrained(t, b.JS, bus.StreamUsage)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/sessions/s-evil")
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `id="top-tool-results"`)
	require.NotContains(t, string(page), evil)
	require.Contains(t, string(page), "&lt;img src=x onerror=alert(1)&gt;")
}

// A database an older release migrated (up to 006) answers cost by tool
// with the command that fixes it, not a bare ClickHouse error.
func TestCostByToolOnAnOlderDatabaseNamesTheFix(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	st, err := openStore(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.migrateUpTo(ctx, 6)
	require.NoError(t, err)
	_, err = QueryToolCost(ctx, dsn, ToolCostQuery{})
	require.ErrorContains(t, err, "run `herald migrate`")
	_, err = Migrate(ctx, dsn)
	require.NoError(t, err)
	rep, err := QueryToolCost(ctx, dsn, ToolCostQuery{})
	require.NoError(t, err)
	require.Empty(t, rep.Rows)
}

// A session's tool costs include its subagents' (delegate_task children),
// as its cost does.
func TestCostByToolOfASessionIncludesItsSubagents(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	svc := startService(t, b, testConfig(dsn))
	now := time.Now()
	parent := usageEvent("p-1", "acme", "p1", "test-model", now, 5000, 10, 0)
	parent.Carried = []*heraldpb.CarriedResult{carriedRow("c1", "delegate_task", 100, 0, 100_000)}
	child := usageEvent("ch-1", "acme", "ch1", "test-model", now, 5000, 10, 0)
	child.ParentSessionId, child.Purpose = "p1", "subagent"
	child.Carried = []*heraldpb.CarriedResult{carriedRow("k1", "search_files", 300, 0, 300_000)}
	other := usageEvent("o-1", "acme", "o1", "test-model", now, 5000, 10, 0)
	other.Carried = []*heraldpb.CarriedResult{carriedRow("k1", "search_files", 900, 0, 900_000)}
	publishUsage(t, b.JS, "", parent, child, other)
	waitDrained(t, b.JS, bus.StreamUsage)

	rep, err := QueryToolCost(context.Background(), dsn, ToolCostQuery{Session: "p1"})
	require.NoError(t, err)
	require.Equal(t, []string{"ch1"}, rep.Subagents)
	require.Len(t, rep.Rows, 2)
	require.Equal(t, "search_files", rep.Rows[0].Tool)
	require.Equal(t, uint64(300_000), rep.Rows[0].ContextCostNanoUSD, "the child's, not the other session's")
	require.Equal(t, uint64(400_000), rep.Total.ContextCostNanoUSD)

	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	var d SessionDetail
	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions/p1", &d))
	require.Len(t, d.TopResults, 2)
	require.Equal(t, "ch1", d.TopResults[0].SessionID)
	require.Equal(t, "k1", d.TopResults[0].CallID)
}

// A result carried in calls of a model without a price has an unknown
// context cost, shown as such, never as $0.
func TestUnpricedContextCostIsUnknownNotZero(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	svc := startService(t, b, testConfig(dsn))
	e := usageEvent("u-1", "acme", "u1", "model-without-price", time.Now(), 5000, 10, 0)
	c := carriedRow("c1", "terminal", 4000, 0, 0)
	c.Unpriced = true
	e.Carried = []*heraldpb.CarriedResult{c}
	publishUsage(t, b.JS, "", e)
	waitDrained(t, b.JS, bus.StreamUsage)

	rep, err := QueryToolCost(context.Background(), dsn, ToolCostQuery{})
	require.NoError(t, err)
	require.Equal(t, uint64(1), rep.Rows[0].UnpricedCarried)
	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	require.Regexp(t, `(?m)^ +terminal .* n/a$`, out.String())
	require.Contains(t, out.String(), "lower bound")

	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	var d SessionDetail
	require.Equal(t, 200, getJSON(t, srv.URL+"/api/sessions/u1", &d))
	require.True(t, d.TopResults[0].Unpriced)
	resp, err := http.Get(srv.URL + "/sessions/u1")
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Regexp(t, `data-cost-nano-usd="0">n/a</td>`, string(page))
}
