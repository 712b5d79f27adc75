package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// TestRunReasoningFlagAsksAndShowsReasoningTokens: `herald run --reasoning`
// sends the effort to an OpenAI-compatible server, the printed result names
// the reasoning tokens, and herald.yaml's per-model setting applies when
// the flag is absent. A value no provider takes is a usage error.
func TestRunReasoningFlagAsksAndShowsReasoningTokens(t *testing.T) {
	model, err := scripted.Start(func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Content: "Tea.", Reasoning: "Short.",
			Usage: &scripted.Usage{PromptTokens: 40, CompletionTokens: 30, ReasoningTokens: 25}}
	})
	require.NoError(t, err)
	defer model.Close()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "herald.yaml"),
		[]byte("reasoning:\n  effort: low\n  per_model:\n    m: {effort: medium}\n"), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}

	var errOut bytes.Buffer
	cmd := heraldCmd(t, ctx, dir, env, "run", "--reasoning", "high", "what to buy")
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	require.Contains(t, errOut.String(), "out 30 (reasoning 25)")

	cmd = heraldCmd(t, ctx, dir, env, "run", "what to buy")
	require.NoError(t, cmd.Run())

	reqs := model.Requests()
	require.Len(t, reqs, 2)
	for i, want := range []string{"high", "medium"} {
		var body struct {
			ReasoningEffort string `json:"reasoning_effort"`
		}
		require.NoError(t, json.Unmarshal(reqs[i].Raw, &body))
		require.Equal(t, want, body.ReasoningEffort, "request %d", i+1)
	}

	errOut.Reset()
	cmd = heraldCmd(t, ctx, dir, env, "run", "--reasoning", "maximal", "x")
	cmd.Stderr = &errOut
	require.Equal(t, 2, exitCode(cmd.Run()))
	require.Contains(t, errOut.String(), "minimal, low, medium, high or off")
}
