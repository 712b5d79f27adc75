package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

type doctorCheck struct {
	Name, Status, Detail, Fix string
}

type doctorOut struct {
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
}

func (d doctorOut) check(t *testing.T, name string) doctorCheck {
	t.Helper()
	for _, c := range d.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, d.Checks)
	return doctorCheck{}
}

// natsServer is a real JetStream server listening on a loopback port; with
// declared, Herald's streams are declared on it as a service would.
func natsServer(t *testing.T, declared bool) string {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), Listen: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	if declared {
		nc, err := nats.Connect(srv.ClientURL())
		require.NoError(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, bus.WaitReady(ctx, js, 1, true, zerolog.Nop()))
	}
	return srv.ClientURL()
}

func runDoctor(t *testing.T, dir string, env map[string]string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, env, append([]string{"doctor"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(cmd.Run())
	return out.String() + errOut.String(), code
}

// A healthy setup: every part answers, so every check is ok and doctor
// exits 0; the key is never printed.
func TestDoctorPassesOnAHealthySetup(t *testing.T) {
	const key = "sk-doctor-test-key-0123456789"
	model, err := scripted.Start(scripted.Conversation(scripted.Tool("herald_doctor_ping", `{"echo":"ok"}`)))
	require.NoError(t, err)
	defer model.Close()
	dsn := freshClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = accounting.Migrate(ctx, dsn)
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	// The fallbacks speak the two other API modes to the same scripted model.
	writeFile(t, filepath.Join(dir, "herald.yaml"), fmt.Sprintf(`fallback_providers:
  - {provider: anthropic, model: claude-haiku-4-5, base_url: %[1]q, api_key_env: DOCTOR_ANTHROPIC_KEY}
  - {provider: openai, model: gpt-4o-mini, base_url: %[1]q, api_mode: codex_responses}
mcp_servers:
  loud: {command: %[2]q, env: {%[3]s: "1"}}
`, model.URL, self, mcpHelperEnv))
	env := map[string]string{"HERALD_NATS_URL": natsServer(t, true), "HERALD_CLICKHOUSE_DSN": dsn,
		"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini", "HERALD_API_KEY": key, "DOCTOR_ANTHROPIC_KEY": key + "-ant"}

	out, code := runDoctor(t, dir, env, "--json")
	require.Equal(t, 0, code, out)
	var rep doctorOut
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.True(t, rep.OK)
	for _, c := range rep.Checks {
		require.Equal(t, "ok", c.Status, "%s: %s", c.Name, c.Detail)
	}
	require.Contains(t, rep.check(t, "streams").Detail, "TASKS WorkQueue/File/R1", "the streams' settings are shown")
	require.Regexp(t, `^ClickHouse \d+\.\d+\.\d+ at clickhouse://.*: schema version \d+ \(latest\)$`, rep.check(t, "clickhouse").Detail)
	for name, mode := range map[string]string{"provider primary": "chat_completions", "provider fallback 1": "anthropic_messages",
		"provider fallback 2": "codex_responses"} {
		prov := rep.check(t, name).Detail
		for _, fact := range []string{"(" + mode + ")", "key accepted", "streamed", "tool call parsed", "usage reported", "price builtin"} {
			require.Contains(t, prov, fact, name)
		}
	}
	require.Contains(t, rep.check(t, "mcp loud").Detail, "mcp_loud_shout", "the MCP server started and listed its tool")
	require.Equal(t, "ok", rep.check(t, "sandbox").Status)
	require.Contains(t, rep.check(t, "workspace").Detail, dir)
	require.NotContains(t, out, key)

	table, code := runDoctor(t, dir, env)
	require.Equal(t, 0, code)
	require.Contains(t, table, "✓ ok    provider primary")
	require.Contains(t, table, "No check failed.")
	require.NotContains(t, table, key)

	// sandbox.mode none is the operator's explicit choice: skipped, not failed.
	noSandbox := map[string]string{"HERALD_SANDBOX": "none"}
	for k, v := range env {
		noSandbox[k] = v
	}
	out, code = runDoctor(t, dir, noSandbox, "--json")
	require.Equal(t, 0, code, out)
	rep = doctorOut{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, "skip", rep.check(t, "sandbox").Status)
	require.Contains(t, rep.check(t, "sandbox").Detail, "mode is none")

	// A stream someone changed by hand is a warning naming the difference.
	nc, err := nats.Connect(env["HERALD_NATS_URL"])
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	changed := s.CachedInfo().Config
	changed.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, changed)
	require.NoError(t, err)
	out, code = runDoctor(t, dir, env, "--json")
	require.Equal(t, 0, code, "a warning is not a failure: %s", out)
	rep = doctorOut{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	streams := rep.check(t, "streams")
	require.Equal(t, "warn", streams.Status)
	require.Contains(t, streams.Detail, "EVENTS: max age 1h0m0s, want 24h0m0s")
	require.Contains(t, streams.Fix, "herald declare")
	keys := map[string]string{}
	for _, r := range model.Requests() {
		keys[r.Path] = r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
	}
	require.Equal(t, "Bearer "+key, keys["/v1/chat/completions"], "the probe sent the configured key")
	require.Equal(t, key+"-ant", keys["/v1/messages"], "each provider its own key")
}

// openAIRefusedKey is the body OpenAI answers an unknown key with (HTTP 401,
// code invalid_api_key), echoing the key masked in the middle; shape as
// quoted in public issue threads (e.g. chatanywhere/GPT_API_free#62).
func openAIRefusedKey(key string) string {
	masked := key[:5] + "*************" + key[len(key)-4:]
	return `{"error":{"message":"Incorrect API key provided: ` + masked +
		`. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
}

// A broken setup: each failing part is named with a fix, doctor exits 1,
// and the refused key is not printed, not even masked.
func TestDoctorNamesEachFailureWithAFix(t *testing.T) {
	const key = "sk-refused-key-abcdefghijkl"
	refusing, err := scripted.Start(scripted.Conversation(scripted.Reply{Status: 401, Body: openAIRefusedKey(key)}))
	require.NoError(t, err)
	defer refusing.Close()
	toolless, err := scripted.Start(scripted.Conversation(scripted.Text("ok")))
	require.NoError(t, err)
	defer toolless.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "herald.yaml"), fmt.Sprintf(`fallback_providers:
  - {provider: openai, model: my-unpriced-model, base_url: %q}
mcp_servers:
  broken: {command: /no/such/mcp-server}
`, toolless.URL))
	env := map[string]string{"HERALD_NATS_URL": natsServer(t, false),
		"HERALD_CLICKHOUSE_DSN": fmt.Sprintf("clickhouse://127.0.0.1:%d/herald", freePort(t)),
		"HERALD_BASE_URL":       refusing.URL, "HERALD_MODEL": "gpt-4o-mini", "HERALD_API_KEY": key,
		"HERALD_WORKSPACE": filepath.Join(dir, "missing")}

	out, code := runDoctor(t, dir, env, "--json")
	require.Equal(t, 1, code, out)
	var rep doctorOut
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.False(t, rep.OK)
	want := map[string]struct{ status, fix string }{
		"nats":                {"ok", ""},
		"streams":             {"fail", "herald declare"},
		"clickhouse":          {"fail", "HERALD_CLICKHOUSE_DSN"},
		"provider primary":    {"fail", "HERALD_API_KEY"},
		"provider fallback 1": {"warn", "tool calling"},
		"mcp broken":          {"fail", "mcp_servers.broken"},
		"workspace":           {"fail", "HERALD_WORKSPACE"},
	}
	for name, w := range want {
		c := rep.check(t, name)
		require.Equal(t, w.status, c.Status, "%s: %s", name, c.Detail)
		require.Contains(t, c.Fix, w.fix, name)
	}
	require.Contains(t, rep.check(t, "provider primary").Detail, "the key was refused")
	require.Contains(t, rep.check(t, "provider fallback 1").Detail, "no price known for my-unpriced-model")
	require.Contains(t, rep.check(t, "streams").Detail, "TASKS")
	require.NotContains(t, out, key)
	require.NotContains(t, out, key[len(key)-4:], "not even the masked key the provider echoed")

	table, code := runDoctor(t, dir, env)
	require.Equal(t, 1, code)
	require.Contains(t, table, "✗ FAIL  provider primary")
	require.Contains(t, table, "→ fix: herald declare")
	require.Contains(t, table, "Some checks failed")
	require.NotContains(t, table, key)
}
