package toolrunner

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// allocatedDuring is how many bytes the process allocated while f ran: an
// upper bound on how far the runner's heap grew for it.
func allocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sparseFile writes head to name in the workspace and extends it, without
// using the disk, to size bytes of zeros: what `printf ... > big; truncate
// -s 64G big` leaves for read_file.
func sparseFile(t *testing.T, root, name, head string, size int64) {
	t.Helper()
	p := filepath.Join(root, name)
	require.NoError(t, os.WriteFile(p, []byte(head), 0o644))
	require.NoError(t, os.Truncate(p, size))
}

func TestReadFileOfASparse64GiBLineIsBoundedAndPrompt(t *testing.T) {
	h := newHarness(t)
	sparseFile(t, h.cfg.WorkspaceRoot, "big", strings.Repeat("a", 9000), 64<<30)

	var content string
	alloc := allocatedDuring(func() {
		res := h.call("read_file", map[string]any{"path": "big"})
		require.False(t, res.GetIsError(), res.GetContent())
		content = res.GetContent()
	})
	require.Less(t, alloc, uint64(48<<20), "the runner allocated %d bytes for one read_file", alloc)
	require.Less(t, len(content), 3*maxLineBytes)
	require.Contains(t, content, "     1|"+strings.Repeat("a", maxLineChars)+" [line truncated: 2000 characters shown of a line longer than 256 MiB]")
	require.Contains(t, content, "big is 64 GiB; read_file reads only its first 256 MiB (1 lines)")
	require.Contains(t, content, "use terminal (tail, sed -n) for the rest")
}

func TestReadFileCutsAGiantLineInTheWindowAndReadsOn(t *testing.T) {
	h := newHarness(t)
	giant := strings.Repeat("x", 20<<20)
	require.NoError(t, os.WriteFile(filepath.Join(h.cfg.WorkspaceRoot, "mixed.txt"),
		[]byte("first\n"+giant+"\nthird\nfourth\n"), 0o644))

	var content string
	alloc := allocatedDuring(func() {
		content = h.call("read_file", map[string]any{"path": "mixed.txt", "limit": 3}).GetContent()
	})
	require.Less(t, alloc, uint64(16<<20), "a 20 MiB line was held in memory")
	require.Contains(t, content, "     1|first\n")
	require.Contains(t, content, "     2|"+strings.Repeat("x", maxLineChars)+" [line truncated: 2000 characters shown of a line of 20971521 bytes (20.0 MiB)]\n")
	require.Contains(t, content, "     3|third\n")
	require.Contains(t, content, "(showing lines 1-3 of 4; read on with offset=4)")
	require.Less(t, len(content), 3000)
}

func TestReadFileStopsCountingPastWhatItReads(t *testing.T) {
	h := newHarness(t)
	// text for the first 8,000 bytes, or read_file takes it for binary
	sparseFile(t, h.cfg.WorkspaceRoot, "log", "one\ntwo\nthree\n"+strings.Repeat("b", 8000), 8<<30)

	content := h.call("read_file", map[string]any{"path": "log", "offset": 2, "limit": 1}).GetContent()
	require.Contains(t, content, "     2|two\n")
	require.NotContains(t, content, "three")
	require.Contains(t, content, "(showing lines 2-2; log is 8 GiB; read_file reads only its first 256 MiB (4 lines); read on with offset=3)")

	content = h.call("read_file", map[string]any{"path": "log", "offset": 100}).GetContent()
	require.Contains(t, content, "offset 100 is past them; use terminal (tail, sed -n) for the rest")
}

// endless is a file of one line that never ends; it cancels the call
// after reads reads.
type endless struct {
	reads  int
	cancel func()
}

func (e *endless) Read(p []byte) (int, error) {
	if e.reads--; e.reads == 0 {
		e.cancel()
	}
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

func TestReadingALineStopsWhenTheCallIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := numberedLines(ctx, &endless{reads: 10, cancel: cancel}, window{first: 1, limit: 10, maxChars: 1000})
	require.ErrorIs(t, err, context.Canceled)
}
