package toolrunner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

func TestPatch(t *testing.T) {
	h := newHarness(t)
	file := filepath.Join(h.cfg.WorkspaceRoot, "main.go")
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte(s), 0o644)) }
	read := func() string { b, err := os.ReadFile(file); require.NoError(t, err); return string(b) }

	write("a := 1\nb := 1\n")
	res := h.call("patch", map[string]any{"path": "main.go", "old_string": "a := 1", "new_string": "a := 2"})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Equal(t, "a := 2\nb := 1\n", read())

	res = h.call("patch", map[string]any{"path": "main.go", "old_string": "c := 1", "new_string": "c := 2"})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "not found")

	res = h.call("patch", map[string]any{"path": "main.go", "old_string": ":= ", "new_string": "= "})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "occurs 2 times")
	require.Equal(t, "a := 2\nb := 1\n", read())

	res = h.call("patch", map[string]any{"path": "main.go", "old_string": ":= ", "new_string": "= ", "replace_all": true})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Equal(t, "a = 2\nb = 1\n", read())

	res = h.call("patch", map[string]any{"path": "missing.go", "old_string": "x", "new_string": "y"})
	require.Contains(t, res.GetContent(), "does not exist")
	res = h.call("patch", map[string]any{"path": "main.go", "old_string": "x", "new_string": "y", "replace_all": "yes"})
	require.Contains(t, res.GetContent(), `"replace_all" must be a boolean`)
}

func TestSearchFiles(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SearchMaxResults = 5 })
	root := h.cfg.WorkspaceRoot
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pkg", "sub"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "a.go"), []byte("package pkg\n// TODO: one\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "sub", "b.go"), []byte("package sub\nfunc B() {} // TODO two\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "notes.md"), []byte("TODO: three\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, ".git", "HEAD"), []byte("TODO hidden\n"), 0o644))
	var many strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&many, "match %d\n", i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "many.txt"), []byte(many.String()), 0o644))

	out := h.call("search_files", map[string]any{"pattern": `TODO:? \w+`}).GetContent()
	require.Contains(t, out, "pkg/a.go:2: // TODO: one")
	require.Contains(t, out, "pkg/sub/b.go:2:")
	require.Contains(t, out, "notes.md:1:")
	require.NotContains(t, out, "hidden")

	out = h.call("search_files", map[string]any{"pattern": "TODO", "file_glob": "*.go", "path": "pkg"}).GetContent()
	require.Contains(t, out, "pkg/a.go")
	require.NotContains(t, out, "notes.md")

	out = h.call("search_files", map[string]any{"pattern": "*", "file_glob": "*.go"}).GetContent()
	require.Equal(t, "pkg/a.go\npkg/sub/b.go", out)

	out = h.call("search_files", map[string]any{"pattern": "match"}).GetContent()
	require.Contains(t, out, "showing the first 5 matching lines")

	res := h.call("search_files", map[string]any{"pattern": "(unclosed"})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), `"pattern" is not a valid regular expression`)
	res = h.call("search_files", map[string]any{"pattern": "x", "path": "../.."})
	require.Equal(t, "denied", res.GetStatus())
}

func TestTodoListIsKeptPerSession(t *testing.T) {
	h := newHarness(t)
	todos := []map[string]string{
		{"id": "1", "content": "write the test", "status": "completed"},
		{"id": "2", "content": "make it pass", "status": "in_progress"},
	}
	res := h.call("todo", map[string]any{"todos": todos})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())

	var got struct {
		Todos []todoItem `json:"todos"`
		Open  int        `json:"open"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.call("todo", map[string]any{}).GetContent()), &got))
	require.Len(t, got.Todos, 2)
	require.Equal(t, "make it pass", got.Todos[1].Content)
	require.Equal(t, 1, got.Open)

	other := h.request("todo", map[string]any{})
	other.SessionId = "another"
	require.Contains(t, h.run(other).GetContent(), `"total":0`)

	res = h.call("todo", map[string]any{"todos": []map[string]string{{"id": "1", "content": "x", "status": "done"}}})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), `"todos[0].status" must be one of`)
}

func TestClarifyAsksAndReturnsTheAnswer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ApprovalTimeout = 10 * time.Second })
	evs := h.events()
	req := h.request("clarify", map[string]any{"question": "Which database?", "choices": []string{"postgres", "sqlite"}})
	h.publish(req, req.GetCallId())
	ev := waitEvent(t, evs, proto.EventClarify)
	require.Equal(t, "Which database?", ev.Message)
	require.Equal(t, []string{"postgres", "sqlite"}, ev.Choices)
	answer(t, h, proto.Input{RequestID: ev.RequestID, Answer: "sqlite"})
	res := h.result(req, 10*time.Second)
	require.Equal(t, "ok", res.GetStatus())
	require.Contains(t, res.GetContent(), "sqlite")
}

func TestClarifyWithoutAnAnswerTimesOut(t *testing.T) {
	h := newHarness(t)
	res := h.call("clarify", map[string]any{"question": "Anyone there?"})
	require.Equal(t, "timeout", res.GetStatus())
	require.Contains(t, res.GetContent(), "did not answer")
}

func TestCircuitBreakerDisablesAFailingTool(t *testing.T) {
	h := newHarness(t)
	fail := map[string]any{"path": "nope.txt", "old_string": "a", "new_string": "b"}
	for i := 0; i < 3; i++ {
		res := h.call("patch", fail)
		require.Contains(t, res.GetContent(), "does not exist")
	}
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "nope.txt"), []byte("a"), 0o644))
	res := h.call("patch", fail)
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "disabled for this session")
	require.Equal(t, "a", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "nope.txt")))))

	// Other tools, and the same tool in another session, still work.
	require.Equal(t, "ok", h.call("read_file", map[string]any{"path": "nope.txt"}).GetStatus())
	other := h.request("patch", fail)
	other.SessionId = "fresh"
	require.Equal(t, "ok", h.run(other).GetStatus())
}

func TestBadArgumentsDoNotTripTheBreaker(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 4; i++ {
		require.Contains(t, h.call("write_file", map[string]any{"path": "a"}).GetContent(), "invalid arguments")
	}
	require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "a", "content": "x"}).GetStatus())
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
