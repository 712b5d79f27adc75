package toolrunner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file a command is still writing grows after the size check: its copy
// stops at the room left instead of filling the runner's disk.
func TestCheckpointCopyOfAGrowingFileStopsAtTheLimit(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "copy")
	room := int64(1 << 20)
	err := copyTo(&endless{reads: -1}, dst, 0o600, &room)
	require.ErrorIs(t, err, errTooBig)
	info, err := os.Stat(dst)
	require.NoError(t, err)
	require.LessOrEqual(t, info.Size(), int64(1<<20)+1)
}
