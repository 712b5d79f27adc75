package e2e

import (
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// herald sessions list names each session by its first prompt and says how
// its last turn ended: a failed session reads failed, not idle.
func TestSessionsListShowsTitleAndOutcome(t *testing.T) {
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		if strings.Contains(r.FirstUser(), "refuse") {
			return scripted.Reply{Status: 400, Body: `{"error":{"message":"bad request","type":"invalid_request_error"}}`}
		}
		return scripted.Text("fine")
	})
	require.NoError(t, err)
	defer model.Close()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini"}
	dir := t.TempDir()
	out, code := runHeraldIn(t, dir, env, "run", "please summarise   the\nrelease notes of this week in three bullet points for the team")
	require.Equal(t, 0, code, out)
	out, code = runHeraldIn(t, dir, env, "run", "refuse this one")
	require.Equal(t, 1, code, out)

	list, code := runHeraldIn(t, dir, env, "sessions", "list")
	require.Equal(t, 0, code, list)
	require.Contains(t, list, "OUTCOME")
	require.Contains(t, list, "TITLE")
	ok := lineContaining(t, list, "please summarise the release notes")
	require.Contains(t, ok, "done")
	require.Contains(t, ok, "text_response")
	require.Contains(t, ok, "…", "a long first prompt is cut")
	failed := lineContaining(t, list, "refuse this one")
	require.Contains(t, failed, "failed")
	require.NotContains(t, failed, "idle")
}

func lineContaining(t *testing.T, text, part string) string {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, part) {
			return l
		}
	}
	t.Fatalf("no line with %q in:\n%s", part, text)
	return ""
}
