package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

func TestVersionIsPrintedByFlagAndCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var lines []string
	for _, arg := range []string{"--version", "version"} {
		var out bytes.Buffer
		cmd := heraldCmd(t, ctx, t.TempDir(), nil, arg)
		cmd.Stdout = &out
		require.NoError(t, cmd.Run(), arg)
		require.Regexp(t, `^herald \S+.* \(go1\.\d+.*\)\n$`, out.String(), arg)
		lines = append(lines, out.String())
	}
	require.Equal(t, lines[0], lines[1])
}

// `herald run -` reads the prompt from stdin, whole.
func TestRunDashReadsThePromptFromStdin(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("read it")))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}, "run", "-")
	cmd.Stdin = strings.NewReader("first line of the task\nsecond line & more\n")
	var out bytes.Buffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Run())
	require.Equal(t, "read it\n", out.String())
	require.Equal(t, "first line of the task\nsecond line & more", model.Requests()[0].LastMessage().Text())
}

// What `herald run` prints reads as a person expects: a denied command
// shows ✗, its && unescaped; one model call is "1 API call"; a provider's
// failure is said once; redirected logs carry no colour codes.
func TestRunOutputReadsAsAPersonExpects(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(
		scripted.Tool("terminal", `{"command":"rm -rf build && echo cleaned"}`),
		scripted.Text("I was not allowed to clean."),
	))
	require.NoError(t, err)
	defer model.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "herald.yaml"), "approvals: {mode: deny}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m", "HERALD_LOG_LEVEL": "info"}
	var errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, env, "run", "clean the build")
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Run(), "stderr: %s", &errOut)
	stderr := errOut.String()
	require.Contains(t, stderr, `⚙ terminal {"command":"rm -rf build && echo cleaned"}`)
	require.NotContains(t, stderr, `\u0026`)
	require.Contains(t, stderr, "✗ terminal denied")
	require.NotContains(t, stderr, "✓ terminal")
	require.Contains(t, stderr, "· 2 API calls · 2 iterations ·")
	require.NotContains(t, stderr, "\x1b[", "stderr is not a terminal: no colour codes")

	failing, err := scripted.Start(scripted.Conversation(scripted.Reply{Status: 400,
		Body: `{"error":{"message":"Invalid value for 'temperature': the model does not take it","type":"invalid_request_error"}}`}))
	require.NoError(t, err)
	defer failing.Close()
	errOut.Reset()
	var out bytes.Buffer
	cmd = heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_BASE_URL": failing.URL, "HERALD_MODEL": "m"}, "run", "hello")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.Equal(t, 1, exitCode(cmd.Run()))
	all := out.String() + errOut.String()
	require.Equal(t, 1, strings.Count(all, "the model does not take it"), "the failure is said once:\n%s", all)
	require.Contains(t, errOut.String(), "· 1 API call · 1 iteration ·")
}

// `herald cost --since 7d` takes days, as insights does.
func TestCostSinceTakesDays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := map[string]string{"HERALD_CLICKHOUSE_DSN": freshClickHouse(t)}
	require.NoError(t, heraldCmd(t, ctx, t.TempDir(), env, "migrate").Run())
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, t.TempDir(), env, "cost", "--since", "7d", "--json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "stderr: %s", &errOut)
	require.True(t, json.Valid(out.Bytes()), out.String())
	cmd = heraldCmd(t, ctx, t.TempDir(), env, "cost", "--since", "a week")
	errOut.Reset()
	cmd.Stderr = &errOut
	require.Equal(t, 2, exitCode(cmd.Run()))
	require.Contains(t, errOut.String(), "not a duration (e.g. 30d, 12h)")
}

// The demo works from a temporary folder reached through a symlink, and it
// deletes its data: its closing line does not offer to continue a
// session it deleted.
func TestDemoDoesNotOfferToContinueDeletedData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	tmp, _ := symlinkedDir(t) // its temporary folder reached through a symlink, as /tmp is on some machines
	cmd := heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_CLICKHOUSE_DSN": freshClickHouse(t), "TMPDIR": tmp}, "demo")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "stderr: %s", &errOut)
	require.NotContains(t, errOut.String(), "continue with")
	require.Contains(t, out.String(), "hello.txt in the workspace now holds:\nHello from Herald!")
	require.NotContains(t, out.String()+errOut.String(), "outside the workspace")
	require.Regexp(t, regexp.MustCompile(`session demo-\S+ \(the demo's data is deleted when it ends; herald demo --keep keeps it\)`), errOut.String())
}

// A misspelt service is a usage error (exit 2) that names the known ones,
// before any connection is tried.
func TestServeUnknownServiceIsAUsageError(t *testing.T) {
	start := time.Now()
	out, code := runHerald(t, nil, "serve", "toolrunnr")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `herald serve: unknown service "toolrunnr" (known:`)
	require.Less(t, time.Since(start), 10*time.Second)
}
