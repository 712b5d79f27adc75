package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// statusReport is the part of `herald status --json` these tests read.
type statusReport struct {
	Consumers []struct {
		Stream, Consumer string
		Waiting          uint64
		InFlight         int `json:"in_flight"`
	} `json:"consumers"`
	Tenants []struct {
		Tenant, Stream string
		Waiting        int
		OldestAgeS     float64 `json:"oldest_age_s"`
	} `json:"tenants"`
	Pools []struct {
		Pool       string
		Runners    int
		Waiting    int
		OldestAgeS float64 `json:"oldest_age_s"`
		NoRunner   bool    `json:"no_runner"`
	} `json:"pools"`
	Warnings []string `json:"warnings"`
}

// TestStatusShowsWorkWaitingForAPoolWithNoRunner runs the built binary
// against a running `herald up`: tenant acme's task names pool gpu, which
// no tool runner serves, so its tool call waits. `herald status --json`
// shows the call waiting for acme on TOOL_CALLS, the gpu pool with work and
// no runner (flagged, and past tools.pool_warning_after said so), the
// default pool with its runner; the text form flags it too, and the
// dashboard's capacity page shows the same behind its token.
func TestStatusShowsWorkWaitingForAPoolWithNoRunner(t *testing.T) {
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		if r.AssistantCount() == 0 {
			return scripted.Tool("read_file", `{"path":"notes.txt"}`)
		}
		return scripted.Text("done")
	})
	require.NoError(t, err)
	t.Cleanup(model.Close)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const token = "status-test-token"
	up := startUpProcess(t, model.URL, 0, upOptions{http: addr, env: map[string]string{"HERALD_DASHBOARD_TOKEN": token},
		yaml: "tools: {pool_warning_after: 1s}\n"})

	task := NewTask("read my notes on the gpu pool")
	task.Pool = "gpu"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, bus.PublishJSON(ctx, up.js, bus.TenantTasks("acme"), "", task))

	// the operator's herald.yaml, as herald up's: the same pool_warning_after
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "herald.yaml"), []byte("tools: {pool_warning_after: 1s}\n"), 0o644))
	env := map[string]string{"HERALD_NATS_URL": up.nc.ConnectedUrl()}
	var rep statusReport
	require.Eventually(t, func() bool {
		out, err := heraldCmd(t, context.Background(), dir, env, "status", "--json").Output()
		if err != nil || json.Unmarshal(out, &rep) != nil {
			return false
		}
		gpu, ok := poolOf(rep, "gpu")
		return ok && gpu.Waiting == 1 && gpu.OldestAgeS >= 1
	}, 30*time.Second, 100*time.Millisecond, "status never showed the gpu pool's call waiting")

	gpu, _ := poolOf(rep, "gpu")
	require.Zero(t, gpu.Runners)
	require.True(t, gpu.NoRunner, "a pool with work and no runner is flagged")
	def, ok := poolOf(rep, bus.DefaultPool)
	require.True(t, ok && def.Runners >= 1 && !def.NoRunner, "herald up's own runner serves the default pool: %+v", rep.Pools)
	var acme bool
	for _, tl := range rep.Tenants {
		acme = acme || tl.Tenant == "acme" && tl.Stream == bus.StreamToolCalls && tl.Waiting == 1 && tl.OldestAgeS > 0
	}
	require.True(t, acme, "acme's tool call waits on TOOL_CALLS: %+v", rep.Tenants)
	var consumers []string
	for _, c := range rep.Consumers {
		consumers = append(consumers, c.Stream+"/"+c.Consumer)
	}
	require.Contains(t, consumers, "LLM_REQUESTS/gateway")
	require.Contains(t, consumers, "TOOL_CALLS/toolrunner-default")
	require.Len(t, rep.Warnings, 1)
	require.Contains(t, rep.Warnings[0], `pool "gpu"`)
	require.Contains(t, rep.Warnings[0], "herald serve toolrunner --pool gpu")
	require.Contains(t, rep.Warnings[0], "past tools.pool_warning_after (1s)")

	out, err := heraldCmd(t, context.Background(), dir, env, "status").Output()
	require.NoError(t, err)
	require.Regexp(t, `(?m)^gpu\s+0\s+1\s+0\s+\S+\s+← no runner$`, string(out))
	require.Contains(t, string(out), `warning: pool "gpu"`)

	// The dashboard's page: behind the token, the same figures.
	page := func(path, tok string) (int, string) {
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		require.NoError(t, err)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, _ := page("/capacity.json", "")
	require.Equal(t, http.StatusUnauthorized, code, "no token, no capacity page")
	code, _ = page("/capacity", "wrong-token")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := page("/capacity.json", token)
	require.Equal(t, http.StatusOK, code)
	var viaPage statusReport
	require.NoError(t, json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&viaPage))
	pg, ok := poolOf(viaPage, "gpu")
	require.True(t, ok && pg.NoRunner && pg.Waiting == 1, "%+v", viaPage.Pools)
	code, body = page("/capacity", token)
	require.Equal(t, http.StatusOK, code)
	// a page a browser loads from a rebinding name is refused, token or not
	req, err := http.NewRequest("GET", "http://"+addr+"/capacity.json", nil)
	require.NoError(t, err)
	req.Host = "attacker.example:80"
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "the capacity page answers only its own hosts")
	require.True(t, strings.Contains(body, "gpu") && strings.Contains(body, "no tool runner takes them"), body)
}

func poolOf(rep statusReport, pool string) (p struct {
	Pool       string
	Runners    int
	Waiting    int
	OldestAgeS float64 `json:"oldest_age_s"`
	NoRunner   bool    `json:"no_runner"`
}, ok bool) {
	for _, q := range rep.Pools {
		if q.Pool == pool {
			return q, true
		}
	}
	return p, false
}
