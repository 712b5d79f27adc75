package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/stretchr/testify/require"
)

// herald insights reads from ClickHouse where time and money went: models
// with their calls and errors, tools with runs and failures, sessions by
// cost and the classes of what failed.
func TestInsightsReportsModelsToolsSessionsAndErrors(t *testing.T) {
	// The provider's 500 echoes part of the key: its message reaches
	// insights without it.
	const key = "e2e-insights-key-0123456789abcdef"
	flaky := scripted.FailFirst(1, scripted.Reply{Status: 500, Body: `{"error":{"message":"The server had an error while processing your request (key ...insights-key-0123456789abcdef).","type":"server_error"}}`},
		scripted.Conversation(scripted.Text("fine after one retry")))
	tools := scripted.Conversation(
		scripted.Tool("read_file", `{"path":"missing.txt"}`),
		scripted.Tool("write_file", `{"path":"a.txt","content":"a"}`),
		scripted.Text("done with the files"),
	)
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if strings.Contains(r.FirstUser(), "flaky") {
			return flaky(r)
		}
		return tools(r)
	}, WithClickHouse(t), WithConfig(func(c *config.Config) { c.Primary.APIKey = key }))
	files, retried := NewTask("work with files"), NewTask("a flaky call")
	require.Equal(t, proto.ExitTextResponse, h.Run(files).ExitReason)
	require.Equal(t, proto.ExitTextResponse, h.Run(retried).ExitReason)

	env := map[string]string{"HERALD_CLICKHOUSE_DSN": h.Config.ClickHouseDSN}
	var rep accounting.Insights
	require.Eventually(t, func() bool {
		out, code := runHerald(t, env, "insights", "--since", "1d", "--json")
		if code != 0 {
			t.Logf("herald insights: %s", out)
		}
		rep = accounting.Insights{}
		return code == 0 && json.Unmarshal([]byte(out), &rep) == nil &&
			len(rep.Models) == 1 && rep.Models[0].Calls == 5 && len(rep.Tools) == 2
	}, time.Minute, 200*time.Millisecond, "ClickHouse never held both runs")

	m := rep.Models[0]
	require.Equal(t, "test-model", m.Model)
	require.Equal(t, uint64(1), m.Errors, "the 500 is one failed attempt")
	require.Positive(t, m.CostUSD)
	byTool := map[string]accounting.ToolInsight{}
	for _, ti := range rep.Tools {
		byTool[ti.Tool] = ti
	}
	require.Equal(t, uint64(1), byTool["read_file"].Runs)
	require.Equal(t, uint64(1), byTool["read_file"].Failures, "reading a missing file failed")
	require.Equal(t, uint64(0), byTool["write_file"].Failures)
	require.Len(t, rep.Sessions, 2)
	require.Equal(t, files.SessionID, rep.Sessions[0].SessionID, "three calls cost more than one")
	require.GreaterOrEqual(t, rep.Sessions[0].CostUSD, rep.Sessions[1].CostUSD)
	classes, messages := map[string]uint64{}, map[string]string{}
	for _, e := range rep.Errors {
		classes[e.Class], messages[e.Class] = e.Count, e.LastMessage
	}
	require.Equal(t, map[string]uint64{"server_error": 1, "tool:error": 1}, classes)
	require.Contains(t, messages["server_error"], "HTTP 500: The server had an error while processing your request (key ...")
	require.NotContains(t, messages["server_error"], "0123456789abcdef", "no part of the key is stored")
	require.Empty(t, messages["tool:error"])

	table, code := runHerald(t, env, "insights")
	require.Equal(t, 0, code, table)
	for _, want := range []string{"the last 7d (since ", "Top models", "test-model", "Tools", "read_file", "Sessions by cost", files.SessionID, "Errors", "server_error", "LAST MESSAGE", "HTTP 500: The server had an error"} {
		require.Contains(t, table, want)
	}
	require.NotContains(t, table, "0123456789abcdef")
	out, code := runHerald(t, env, "insights", "--since", "soon")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "not a duration")
}

// runHerald runs bin/herald in a fresh folder and returns what it printed
// (stdout, then stderr) and its exit code.
func runHerald(t *testing.T, env map[string]string, args ...string) (string, int) {
	return runHeraldIn(t, t.TempDir(), env, args...)
}

func runHeraldIn(t *testing.T, dir string, env map[string]string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, env, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(cmd.Run())
	return out.String() + errOut.String(), code
}
