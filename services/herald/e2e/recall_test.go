package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/stretchr/testify/require"
)

// notebook is an external memory provider that remembers one fact.
type notebook struct{}

func (notebook) Name() string { return "notebook" }
func (notebook) Recall(_ context.Context, _, query string) (string, error) {
	if strings.Contains(query, "indent") {
		return "The user prefers tabs over spaces.", nil
	}
	return "", nil
}
func (notebook) Observe(context.Context, string, string, string) error { return nil }

// Recalled memory reaches the model fenced inside the turn's user message,
// and never the persisted transcript.
func TestRecalledMemoryIsFencedAndNeverPersisted(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Text("Tabs it is.")),
		func(_ *config.Config, o *app.Options) { o.MemoryProvider = notebook{} })
	task := NewTask("how should I indent this file?")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)

	reqs := h.Model.Requests()
	require.NotEmpty(t, reqs)
	user := reqs[0].LastMessage()
	require.Equal(t, "user", user.Role)
	require.Contains(t, user.Text(), "<memory-context>")
	require.Contains(t, user.Text(), "tabs over spaces")
	require.True(t, strings.HasSuffix(user.Text(), task.Prompt), "the user's own words come after the fence")

	for _, m := range h.Transcript(task.SessionID) {
		require.NotContains(t, m.Content, "tabs over spaces", "recalled memory is never persisted")
		if m.Role == "user" {
			require.Equal(t, task.Prompt, m.Content)
		}
	}
}
