package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/stretchr/testify/require"
)

// natsCLIVersion is the release of the official nats CLI the tests use
// (v0.5.1 does not install from the module proxy).
const natsCLIVersion = "v0.5.0"

// natsCLI finds the nats CLI: $HERALD_NATS_CLI (.ci/run sets it), then PATH,
// else it installs the pinned release into the user's cache, so the test
// runs (or fails saying why), never skips.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HERALD_NATS_CLI"); p != "" {
		require.FileExists(t, p, "HERALD_NATS_CLI names no file")
		return p
	}
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	dir := filepath.Join(cache, "herald-test", "natscli-"+natsCLIVersion)
	bin := filepath.Join(dir, "nats")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "github.com/nats-io/natscli/nats@"+natsCLIVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "installing the nats CLI (set HERALD_NATS_CLI to skip this): %s", out)
	return bin
}

// The example plugin of docs/SUBJECTS.md, run by the real nats CLI, refuses a call.
func TestNatsCLIPluginAnswersPreToolCall(t *testing.T) {
	cli := natsCLI(t)
	h := Start(t, scripted.Conversation(
		scripted.Tool("terminal", `{"command":"curl -s http://example.com/install.sh > install.sh"}`),
		scripted.Tool("terminal", `{"command":"echo allowed > ok.txt"}`),
		scripted.Text("done")),
		func(_ *config.Config, o *app.Options) { o.Listen = "127.0.0.1:0" })
	script, err := filepath.Abs(filepath.Join("testdata", "no-curl.sh"))
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "SUBJECTS.md"))
	require.NoError(t, err)
	body, err := os.ReadFile(script)
	require.NoError(t, err)
	require.Contains(t, string(page), string(body), "docs/SUBJECTS.md shows the plugin this test runs")
	plugin := exec.Command(cli, "--server", h.App.Server.ClientURL(), "reply", bus.HookPreToolCall(), "--command", script)
	plugin.Stdout, plugin.Stderr = os.Stderr, os.Stderr
	require.NoError(t, plugin.Start())
	t.Cleanup(func() { _ = plugin.Process.Kill(); _ = plugin.Wait() })
	require.Eventually(t, func() bool {
		m, err := h.NC.Request(bus.HookPreToolCall(), []byte(`{"tool":"read_file","arguments":{}}`), 200*time.Millisecond)
		return err == nil && string(m.Data) == "{\"allow\": true}\n"
	}, 20*time.Second, 50*time.Millisecond, "the nats CLI plugin never answered")

	task := NewTask("fetch the installer")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)
	reqs := h.RequestsOf(task.Prompt)
	require.Len(t, reqs, 3)
	require.Equal(t, "policy: no curl from agents; ask the user to fetch it", reqs[1].LastMessage().Text())
	require.NoFileExists(t, filepath.Join(h.Workspace, "install.sh"))
	require.FileExists(t, filepath.Join(h.Workspace, "ok.txt"), "the plugin allows other calls")
	finished := h.EventsOfType(task.SessionID, proto.EventToolFinished)
	require.Len(t, finished, 2)
	require.Equal(t, "denied", finished[0].Status)
	require.Equal(t, "ok", finished[1].Status)
}
