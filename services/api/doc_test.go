package api_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runMarker precedes each code block of docs/API.md that TestAPIDocExamples runs.
const runMarker = "<!-- herald:run -->"

// docExamples returns the marked code blocks of a markdown file, in order.
func docExamples(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks []string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != runMarker {
			continue
		}
		require.True(t, i+1 < len(lines) && strings.HasPrefix(lines[i+1], "```"), "%s:%d: a code block follows the marker", path, i+1)
		var b []string
		for i += 2; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			b = append(b, lines[i])
		}
		blocks = append(blocks, strings.Join(b, "\n"))
	}
	return blocks
}

func TestAPIDocExamples(t *testing.T) {
	blocks := docExamples(t, filepath.Join("..", "..", "docs", "API.md"))
	require.GreaterOrEqual(t, len(blocks), 6)
	h := startHerald(t, "")
	bin := t.TempDir()
	require.NoError(t, os.Symlink(heraldBin, filepath.Join(bin, "herald")))
	script := "set -euo pipefail\n" + strings.ReplaceAll(strings.Join(blocks, "\n"), "http://127.0.0.1:8080", h.URL)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = t.TempDir()
	for _, kv := range h.env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + bin + string(os.PathListSeparator) + p
		}
		cmd.Env = append(cmd.Env, kv)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	got := out.String()
	for _, want := range []string{
		`"status":"running"`,            // POST /v1/runs
		"event: result",                 // the event stream's end
		`"answer": "Hello from a run."`, // GET /v1/runs/{id}
		`"text": "Paris."`,              // POST /v1/responses
		"response.completed",            // the streamed response
		"echo: What did I say?",         // chat continued in its session
		`"code":"invalid_task"`,         // the error shape
		"1h\n",                          // a schedule listed over HTTP
		"removed sch_",                  // and removed
		"401\n",                         // keyed: no key, no answer
		"acme\n",                        // a key's run is its tenant's
	} {
		require.Contains(t, got, want)
	}
}
