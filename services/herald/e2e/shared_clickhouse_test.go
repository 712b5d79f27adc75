package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A herald run starts the user's private ClickHouse, a herald up started
// meanwhile uses it, and the run ends, taking its server with it: herald
// up's costs still reach ClickHouse (up starts the server again), and
// herald cost shows them.
func TestUpKeepsItsCostsWhenTheRunThatStartedClickHouseEnds(t *testing.T) {
	needClickHouseServer(t)
	slow, err := scripted.Start(scripted.Conversation(scripted.Reply{Content: "too late", Delay: time.Minute}))
	require.NoError(t, err)
	defer slow.Close()
	quick, err := scripted.Start(scripted.Conversation(scripted.Text("done")))
	require.NoError(t, err)
	defer quick.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel) // after herald up's own cleanup, which stops the server it started
	state := t.TempDir()
	shared := map[string]string{"XDG_STATE_HOME": state, "HERALD_PRIVATE_CLICKHOUSE": ""}
	record := filepath.Join(state, "herald", "clickhouse.json")

	run := heraldCmd(t, ctx, t.TempDir(), with(shared, "HERALD_BASE_URL", slow.URL, "HERALD_MODEL", "m"), "run", "think")
	require.NoError(t, run.Start())
	var started string
	require.Eventually(t, func() bool {
		started = recordedDSN(record)
		return started != "" && slow.Calls() > 0
	}, 2*time.Minute, 50*time.Millisecond, "the run started the private ClickHouse and its task")

	port := freePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", port)
	upEnv := with(shared, "HERALD_BASE_URL", quick.URL, "HERALD_MODEL", "gpt-4o-mini", "HERALD_NATS_URL", natsURL)
	project := t.TempDir()
	var upErr heraldtest.SyncBuffer
	up := heraldCmd(t, ctx, project, upEnv, "up", "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), "--http", "")
	up.Stderr = &upErr
	require.NoError(t, up.Start())
	t.Cleanup(func() { _ = up.Process.Signal(os.Interrupt); _ = up.Wait() })
	require.Eventually(t, func() bool { return strings.Contains(upErr.String(), "Herald is up") }, time.Minute, 50*time.Millisecond, "%s", &upErr)

	require.NoError(t, run.Process.Signal(os.Interrupt))
	require.Equal(t, 1, exitCode(run.Wait()))
	require.False(t, answers(started), "the run's server stopped with it")
	require.Eventually(t, func() bool { dsn := recordedDSN(record); return dsn != "" && dsn != started },
		time.Minute, 50*time.Millisecond, "herald up started the private ClickHouse again: %s", &upErr)

	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	results, err := nc.SubscribeSync("herald.session.s1.result")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("herald.tasks", []byte(`{"session_id":"s1","prompt":"hello"}`)))
	msg, err := results.NextMsg(time.Minute)
	require.NoError(t, err, "%s", &upErr)
	var res proto.Result
	require.NoError(t, json.Unmarshal(msg.Data, &res))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)

	for _, dir := range []string{project, t.TempDir()} { // up's folder, and any other
		var rep accounting.CostReport
		require.Eventually(t, func() bool {
			out, code := runHeraldIn(t, dir, shared, "cost", "--by", "model", "--json")
			rep = accounting.CostReport{}
			return code == 0 && json.Unmarshal([]byte(out), &rep) == nil && rowCalls(rep, "gpt-4o-mini") == uint64(res.APICalls)
		}, time.Minute, 200*time.Millisecond, "herald cost in %s never showed herald up's task: %v\n%s", dir, rep, &upErr)
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func recordedDSN(record string) string {
	data, err := os.ReadFile(record)
	if err != nil {
		return ""
	}
	var rec struct{ DSN string }
	if json.Unmarshal(data, &rec) != nil || !answers(rec.DSN) {
		return ""
	}
	return rec.DSN
}

func answers(dsn string) bool {
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	conn, err := net.DialTimeout("tcp", u.Host, 300*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

func rowCalls(rep accounting.CostReport, key string) uint64 {
	for _, r := range rep.Rows {
		if r.Key == key {
			return r.Calls
		}
	}
	return 0
}
