package logging

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Logs sent to a file, a pipe or a buffer (stderr redirected) carry no
// colour codes; the text stays readable.
func TestRedirectedLogsHaveNoColourCodes(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "info", true)
	log.Info().Str("service", "loop").Msg("loop started")
	require.Contains(t, buf.String(), "loop started")
	require.Contains(t, buf.String(), "service=loop")
	require.NotContains(t, buf.String(), "\x1b[")

	path := filepath.Join(t.TempDir(), "herald.log")
	f, err := os.Create(path)
	require.NoError(t, err)
	flog := New(f, "info", true)
	flog.Warn().Msg("to a file")
	require.NoError(t, f.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), "to a file")
	require.NotContains(t, string(data), "\x1b[")

	r, w, err := os.Pipe()
	require.NoError(t, err)
	plog := New(w, "info", true)
	plog.Info().Msg("through a pipe")
	require.NoError(t, w.Close())
	var piped bytes.Buffer
	_, err = piped.ReadFrom(r)
	require.NoError(t, err)
	require.Contains(t, piped.String(), "through a pipe")
	require.NotContains(t, piped.String(), "\x1b[")
}
