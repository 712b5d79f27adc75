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

// TestAPIKeyEchoedInPartNeverLeaves: the provider refuses the key with a
// 401 whose message echoes 20 characters from its middle, without its
// prefix (as providers echo a wrong key, cut). No run of 12 characters of
// the key reaches the logs (debug level), the session's events, any stream
// message, the result, or ClickHouse (the failed call's usage row, its
// error_class and message).
func TestAPIKeyEchoedInPartNeverLeaves(t *testing.T) {
	const secret = "sk-proj-hEr4ldC4nary9xQ2mZ7vK1pL8wT3nB6yU"
	fragment := secret[12:32]
	echo := `{"error":{"message":"Incorrect API key provided: ...` + fragment + `... You can find your API key at https://platform.example/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}`
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		return scripted.Reply{Status: 401, Body: echo}
	})
	require.NoError(t, err)
	defer model.Close()
	dsn := freshClickHouse(t)
	c := startCluster(t, map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini",
		"HERALD_API_KEY": secret, "HERALD_LOG_LEVEL": "debug", "HERALD_LOG_FORMAT": "json",
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

	task := NewTask("hello")
	submit(t, c, task)
	res := waitResult(t, c, task, 2*time.Minute)
	require.NotEqual(t, proto.ExitTextResponse, res.ExitReason, "the provider refused every call")
	require.Contains(t, res.Error, "Incorrect API key provided", "the provider's message reaches the user")
	require.Equal(t, "Bearer "+secret, model.Requests()[0].Header.Get("Authorization"), "the key was in use")

	// runs are every 12-character run of the key: none may appear anywhere.
	var runs []string
	for i := 0; i+12 <= len(secret); i++ {
		runs = append(runs, secret[i:i+12])
	}
	requireNoRun := func(where, text string) {
		t.Helper()
		for _, r := range runs {
			require.NotContains(t, text, r, "%s holds a run of the key", where)
		}
	}
	resJSON, err := json.Marshal(res)
	require.NoError(t, err)
	requireNoRun("the result", string(resJSON))

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
			requireNoRun("stream "+cfg.Name, string(m.Data)+string(hdr))
		}
	}
	require.Positive(t, checked)

	// ClickHouse: the failed call's usage row, with its error class.
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	var dump string
	require.Eventually(t, func() bool {
		out, err := exec.Command("clickhouse-client", "--host", u.Hostname(), "--port", u.Port(), "--query",
			"SELECT * FROM "+db+".usage_events FORMAT TSV").CombinedOutput()
		dump = string(out)
		return err == nil && strings.Contains(dump, task.SessionID)
	}, time.Minute, 200*time.Millisecond)
	require.Contains(t, dump, "auth", "the row records the failure's class")
	requireNoRun("ClickHouse", dump)

	mu.Lock()
	require.NotEmpty(t, events)
	requireNoRun("the session's events", strings.Join(events, "\n"))
	mu.Unlock()
	c.stopAll()
	logs := p.out.String()
	require.Contains(t, logs, `"level":"debug"`, "the services logged at debug level")
	requireNoRun("the logs", logs)
}
