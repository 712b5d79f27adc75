package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFilesLimitsSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte("files: {max_write_bytes: 1048576, max_workspace_bytes: 10737418240}\n"), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	require.NoError(t, cfg.Validate())
	require.Equal(t, Files{MaxWriteBytes: 1 << 20, MaxWorkspaceBytes: 10 << 30}, cfg.Files)

	cfg.Files.MaxWorkspaceBytes = -1
	require.ErrorContains(t, cfg.Validate(), "files limits must not be negative")
}
