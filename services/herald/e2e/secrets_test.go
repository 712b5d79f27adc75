package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestAPIKeyNeverLeaves runs a session with a known fake API key, every
// service at debug log level, then looks for the key everywhere it must not
// be: logs, events, every message of every stream (transcripts, results,
// requests, usage, dead letters), the tool's environment and ClickHouse.
func TestAPIKeyNeverLeaves(t *testing.T) {
	const secret = "sk-herald-canary-7f3a9c1e5b"
	model, err := scripted.Start(scripted.Conversation(
		scripted.Tool("terminal", `{"command":"env; echo done"}`),
		scripted.Tool("write_file", `{"path":"out.txt","content":"hello"}`),
		scripted.Text("finished"),
	))
	require.NoError(t, err)
	defer model.Close()
	dsn := freshClickHouse(t)
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini",
		"HERALD_API_KEY": secret, "OPENAI_API_KEY": secret, "HERALD_LOG_LEVEL": "debug", "HERALD_LOG_FORMAT": "json",
		"HERALD_WORKSPACE": t.TempDir(), "HERALD_DATA_DIR": t.TempDir(), "HERALD_CLICKHOUSE_DSN": dsn})
	var mu sync.Mutex
	var events []string
	sub, err := c.NC.Subscribe("herald.session.*.events", func(m *nats.Msg) {
		mu.Lock()
		events = append(events, string(m.Data))
		mu.Unlock()
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	p := c.serve("accounting", "memory", "toolrunner", "compressor", "gateway", "loop")

	task := NewTask("show me the environment")
	submit(t, c, task)
	res := waitResult(t, c, task, 2*time.Minute)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	require.Equal(t, "Bearer "+secret, model.Requests()[0].Header.Get("Authorization"), "the key was in use")

	// The tool ran `env`: its output is in the transcript; the key is not.
	var toolOut string
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" {
				toolOut += m.Text()
			}
		}
	}
	require.Contains(t, toolOut, "done", "the terminal call ran")
	require.NotContains(t, toolOut, secret, "the tool's environment had the key")

	// Every message of every stream, headers included.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checked := 0
	for _, cfg := range bus.Streams(1) {
		s, err := c.JS.Stream(ctx, cfg.Name)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue // removed from a work queue
			}
			checked++
			hdr, _ := json.Marshal(m.Header)
			require.NotContains(t, string(m.Data)+string(hdr), secret, "stream %s message %d", cfg.Name, seq)
		}
	}
	require.Positive(t, checked)

	// ClickHouse: wait until the run's usage and tool rows are in, then dump them.
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	var dump string
	require.Eventually(t, func() bool {
		out, err := exec.Command("clickhouse-client", "--host", u.Hostname(), "--port", u.Port(), "--query",
			"SELECT * FROM "+db+".usage_events FORMAT TSV").CombinedOutput()
		if err != nil || strings.Count(string(out), "\n") < res.APICalls {
			return false
		}
		tools, err := exec.Command("clickhouse-client", "--host", u.Hostname(), "--port", u.Port(), "--query",
			"SELECT * FROM "+db+".tool_events FORMAT TSV").CombinedOutput()
		dump = string(out) + string(tools)
		return err == nil && strings.Count(string(tools), "\n") >= 2
	}, time.Minute, 200*time.Millisecond)
	require.Contains(t, dump, task.SessionID)
	require.NotContains(t, dump, secret)

	mu.Lock()
	require.NotEmpty(t, events)
	require.NotContains(t, strings.Join(events, "\n"), secret)
	mu.Unlock()
	c.stopAll()
	logs := p.out.String()
	require.Contains(t, logs, `"level":"debug"`, "the services logged at debug level")
	require.NotContains(t, logs, secret)
	require.NotContains(t, logs, secret[len(secret)-10:], "not even its tail")
}
