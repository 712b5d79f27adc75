package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// doctorJSON runs `herald doctor --json ARGS` and decodes its stdout, which
// must be the report alone, whatever went wrong.
func doctorJSON(t *testing.T, dir string, env map[string]string, args ...string) (doctorOut, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, env, append([]string{"doctor", "--json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(cmd.Run())
	var rep doctorOut
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "stdout is JSON: %q (stderr %q)", out.String(), errOut.String())
	return rep, code
}

// Typos in herald.yaml are ignored settings: every command names them at
// start, doctor warns (fails with --strict), and a file that does not parse
// is still a JSON report.
func TestConfigTyposAreNamedAtStartAndByDoctor(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("ok")))
	require.NoError(t, err)
	defer model.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "herald.yaml"), "agent: {max_turn: 5}\nmodle: gpt-4o\n")
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	run := heraldCmd(t, ctx, dir, env, "run", "hello")
	run.Stdout, run.Stderr = &out, &errOut
	require.NoError(t, run.Run(), "unknown keys warn, they do not stop a run: %s", &errOut)
	require.Contains(t, errOut.String(), "herald: warning: herald.yaml: unknown key agent.max_turn (line 1): did you mean agent.max_turns? (ignored)")
	require.Contains(t, errOut.String(), "unknown key modle (line 2): did you mean model?")
	require.Equal(t, "ok\n", out.String())

	rep, _ := doctorJSON(t, dir, env)
	c := rep.check(t, "config")
	require.Equal(t, "warn", c.Status)
	require.Contains(t, c.Detail, "agent.max_turn")
	require.Contains(t, c.Detail, "modle")
	require.Contains(t, c.Fix, "docs/CONFIG.md")

	rep, code := doctorJSON(t, dir, env, "--strict")
	require.Equal(t, "fail", rep.check(t, "config").Status)
	require.False(t, rep.OK)
	require.Equal(t, 1, code)

	writeFile(t, filepath.Join(dir, "herald.yaml"), "agent: {max_turns: 5\n")
	rep, code = doctorJSON(t, dir, env)
	require.Equal(t, 1, code, "a configuration that does not load is a failed check, not a usage error")
	require.False(t, rep.OK)
	c = rep.check(t, "config")
	require.Equal(t, "fail", c.Status)
	require.Contains(t, c.Detail, "herald.yaml")
	require.Contains(t, c.Detail, "line")

	out.Reset()
	doctor := heraldCmd(t, ctx, dir, env, "doctor")
	doctor.Stdout = &out
	require.Equal(t, 1, exitCode(doctor.Run()))
	require.Contains(t, out.String(), "✗ FAIL  config")

	doctor = heraldCmd(t, ctx, dir, env, "doctor", "--no-such-flag")
	require.Equal(t, 2, exitCode(doctor.Run()), "a bad flag stays a usage error")
}
