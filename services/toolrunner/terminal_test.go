package toolrunner

import (
	"context"
	"fmt"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTerminalReportsOutputAndExitCode(t *testing.T) {
	h := newHarness(t)
	res := h.call("terminal", map[string]any{"command": "echo out; echo err >&2; exit 3"})
	r := terminalOf(t, res)
	require.Equal(t, 3, r.ExitCode)
	require.Contains(t, r.Output, "out")
	require.Contains(t, r.Output, "err")
	require.Equal(t, "ok", res.GetStatus())
}

func TestTerminalTimeoutKillsTheProcessGroup(t *testing.T) {
	h := newHarness(t)
	start := time.Now()
	res := h.call("terminal", map[string]any{"command": heartbeat("beat") + "sleep 60", "timeout": 1})
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, "timeout", res.GetStatus())
	require.True(t, res.GetIsError())
	r := terminalOf(t, res)
	require.Contains(t, r.Error, "timed out")
	requireHeartbeatStops(t, filepath.Join(h.cfg.WorkspaceRoot, "beat"), "the background child outlived the timeout")
}

// heartbeat is a shell fragment starting a background loop that rewrites
// file (in the workspace) every 20 ms for as long as it lives, and waiting
// until it has written once: proof of life that, unlike a pid, means the
// same inside a PID namespace and out.
func heartbeat(file string) string {
	return fmt.Sprintf("(while :; do echo $RANDOM > %[1]s; sleep 0.02; done) & until [ -e %[1]s ]; do sleep 0.01; done; ", file)
}

// requireHeartbeatStops waits until the heartbeat at path has been written
// once and then not for 500 ms.
func requireHeartbeatStops(t *testing.T, path, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		info, err := os.Stat(path)
		return err == nil && time.Since(info.ModTime()) > 500*time.Millisecond
	}, 10*time.Second, 20*time.Millisecond, msg)
}

// processAlive: present in /proc and not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestTerminalOutputIsTruncatedHeadAndTail(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TerminalMaxChars = 1000 })
	res := h.call("terminal", map[string]any{"command": "echo FIRST; seq 1 100000; echo LAST"})
	r := terminalOf(t, res)
	require.Contains(t, r.Output, "FIRST")
	require.Contains(t, r.Output, "LAST")
	require.Contains(t, r.Output, "truncated")
	require.Less(t, len([]rune(r.Output)), 1300)
	require.Equal(t, 0, r.ExitCode)
}

func TestTerminalEnvironmentHasNoSecrets(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-fake-openai-123")
	t.Setenv("GITHUB_TOKEN", "ghp_fake456")
	t.Setenv("HERALD_API_KEY", "herald-fake-789")
	t.Setenv("NATS_CREDS", "/secret/nats.creds")
	t.Setenv("MY_DB_PASSWORD", "hunter2")
	t.Setenv("HARMLESS_SETTING", "visible")
	t.Setenv("MY_LLM", "named-in-herald-yaml")
	t.Setenv("INNOCENT_LOOKING", "sk-the-primary-key")
	// Credentials under names that do not say so, as a deployment has them.
	leaks := map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic b3RlbC1zZWNyZXQ",
		"DATABASE_URL":               "postgres://app:pg-secret-1@db:5432/app",
		"ANALYTICS_DSN":              "clickhouse://ch-secret-2@ch:9000/x",
		"HTTPS_PROXY":                "http://proxyuser:proxy-secret-3@proxy:3128",
		"ALERTS_SIGNING":             "webhook-secret-4",
		"PGCONNECT":                  "host=db user=app password=libpq-secret-5",
		"NPM_CONFIG__AUTH":           "npm-auth-6",
		"REPO_REMOTE":                "https://ghp-token-7@github.com/acme/app.git",
		"WRAPPED":                    "Bearer sk-the-primary-key",
		"UPSTREAM_OAUTH":             "oauth-8",
	}
	for name, value := range leaks {
		t.Setenv(name, value)
	}
	t.Setenv("GIT_AUTHOR_NAME", "Visible Author")
	t.Setenv("HTTP_PROXY", "http://proxy:3128")
	h := newIdleHarness(t, heraldtest.StartBus(t))
	deps := depsFor(h.bus.NC, h.bus.JS, t)
	deps.Config.FallbackProviders = []config.Provider{{Model: "m", APIKeyEnv: "MY_LLM"}}
	deps.Config.Primary.APIKey = "sk-the-primary-key"
	deps.Config.Budgets.Webhook = config.BudgetWebhook{URL: "http://hooks", SecretEnv: "ALERTS_SIGNING", Secret: "webhook-secret-4"}
	svc, err := New(h.cfg, deps)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })

	env := terminalOf(t, h.call("terminal", map[string]any{"command": "env"})).Output
	program := h.call("execute_code", map[string]any{"code": "import os\nfor k, v in os.environ.items(): print(k + '=' + v)"})
	require.Equal(t, "ok", program.GetStatus(), program.GetContent())
	for _, out := range []string{env, program.GetContent()} {
		for _, secret := range []string{"sk-fake-openai-123", "ghp_fake456", "herald-fake-789", "nats.creds", "hunter2", "OPENAI_API_KEY", "named-in-herald-yaml", "sk-the-primary-key"} {
			require.NotContains(t, out, secret)
		}
		for name, value := range leaks {
			require.NotContains(t, out, name+"=", "%s reached the command", name)
			require.NotContains(t, out, value)
		}
		require.Contains(t, out, "HARMLESS_SETTING=visible")
		require.Contains(t, out, "GIT_AUTHOR_NAME=Visible Author")
		require.Contains(t, out, "HTTP_PROXY=http://proxy:3128")
		require.Contains(t, out, "PATH=")
	}
}

func TestTruncateHeadTail(t *testing.T) {
	s := strings.Repeat("a", 500) + strings.Repeat("é", 500) + strings.Repeat("z", 500)
	out := truncateHeadTail(s, 100)
	require.True(t, strings.HasPrefix(out, "aaaa"))
	require.True(t, strings.HasSuffix(out, "zzzz"))
	require.Contains(t, out, "1400 characters truncated")
	require.Equal(t, "short", truncateHeadTail("short", 100))
}

func TestTerminalWaitAndBackgroundJobsBehaveAsInAShell(t *testing.T) {
	h := newHarness(t)
	start := time.Now()
	// a, started first, waits for b's flag: the two run at once (run one after
	// the other, a would wait forever), whatever the machine's load.
	res := h.call("terminal", map[string]any{"command": "rm -f b.flag; (while [ ! -e b.flag ]; do sleep 0.01; done; echo a) & (sleep 0.1; echo b; : > b.flag) & wait; echo done; exit 4"})
	r := terminalOf(t, res)
	require.Equal(t, 4, r.ExitCode)
	require.Equal(t, "b\na\ndone\n", r.Output)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestToolOutputNeverShowsARunOfAProviderKey(t *testing.T) {
	// The key itself never reaches a command; but a file in the workspace
	// (a .env, a log of an earlier run, a provider's error saved to disk)
	// may hold it, whole or in part, without its prefix.
	const key = "sk-proj-Qw3rTy7uIoP0aSdFgHjKl9ZxCvBnM4"
	h := newIdleHarness(t, heraldtest.StartBus(t))
	deps := depsFor(h.bus.NC, h.bus.JS, t)
	deps.Config.Primary.APIKey = key
	svc, err := New(h.cfg, deps)
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })

	fragment := key[10:30] // 20 characters from the middle
	saved := "401 Unauthorized: Incorrect API key provided: ..." + fragment + "...\nthe rest of the log\n"
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "provider.log"), []byte(saved), 0o644))
	outs := []string{
		h.call("read_file", map[string]any{"path": "provider.log"}).GetContent(),
		h.call("terminal", map[string]any{"command": "cat provider.log; echo " + key[8:] + "; printf '%s' " + key[3:15]}).GetContent(),
		h.call("search_files", map[string]any{"pattern": "Incorrect"}).GetContent(),
		h.call("execute_code", map[string]any{"code": "print(open('provider.log').read())"}).GetContent(),
	}
	for i, out := range outs {
		require.Contains(t, out, "Incorrect API key provided", "call %d ran: %s", i, out)
		for j := 0; j+12 <= len(key); j++ {
			require.NotContains(t, out, key[j:j+12], "call %d showed a run of the key: %s", i, out)
		}
		require.Contains(t, out, "[redacted]", "call %d", i)
	}
}
