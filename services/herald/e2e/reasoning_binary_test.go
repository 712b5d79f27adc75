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

// TestChatReasoningCommandSetsTheNextTurns: `herald chat --reasoning low`
// asks low, `/reasoning high` asks high from the next turn on, `/reasoning
// off` asks nothing, and a wrong value is refused where it is typed.
func TestChatReasoningCommandSetsTheNextTurns(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("one"), scripted.Text("two"), scripted.Text("three")))
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	term := startTerminal(t, chatCmd(t, ctx, t.TempDir(), model.URL, "--reasoning", "low"))
	term.waitFor("/help for commands")
	term.typeKeys("first\r")
	term.waitFor("one")
	term.waitFor("text_response")
	term.typeKeys("/reasoning extreme\r")
	term.waitFor(`usage: /reasoning minimal|low|medium|high|off (got "extreme")`)
	term.typeKeys("/reasoning high\r")
	term.waitFor("reasoning high")
	term.typeKeys("second\r")
	term.waitFor("two")
	term.typeKeys("/reasoning off\r")
	term.waitFor("reasoning off")
	term.typeKeys("third\r")
	term.waitFor("three")

	reqs := model.Requests()
	require.Len(t, reqs, 3)
	for i, want := range []string{`"low"`, `"high"`, ""} {
		var body map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(reqs[i].Raw, &body))
		require.Equal(t, want, string(body["reasoning_effort"]), "turn %d", i+1)
	}
}
