package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSandboxKeysLoadWithDefaultsAndPoolOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
sandbox:
  memory_mb: 4096
  read_only: [/opt/toolchains]
  pools:
    gpu: {network: true, processes: 1024, read_only: [/opt/cuda]}
`), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	require.NoError(t, cfg.Validate())
	sb := cfg.Sandbox
	require.Equal(t, SandboxBwrap, sb.Mode, "bwrap unless none is set")
	require.False(t, sb.Network)
	require.Equal(t, 300, sb.CPUSeconds, "defaults survive a partial sandbox block")
	require.Equal(t, 4096, sb.MemoryMB)
	gpu := sb.ForPool("gpu")
	require.True(t, gpu.Network)
	require.Equal(t, 1024, gpu.Processes)
	require.Equal(t, 4096, gpu.MemoryMB)
	require.Equal(t, []string{"/opt/toolchains", "/opt/cuda"}, gpu.ReadOnly)

	cfg.applyEnv(func(k string) string { return map[string]string{"HERALD_SANDBOX": "none"}[k] })
	require.Equal(t, SandboxNone, cfg.Sandbox.Mode, "HERALD_SANDBOX=none opts out explicitly")
}

func TestSandboxValidationNamesTheBadKey(t *testing.T) {
	cfg := Default()
	cfg.Sandbox.Mode = "docker"
	cfg.Sandbox.Processes = 0
	cfg.Sandbox.ReadOnly = []string{"relative/path"}
	err := cfg.Validate()
	require.ErrorContains(t, err, `sandbox.mode must be bwrap or none, got "docker"`)
	require.ErrorContains(t, err, "processes must be positive")
	require.ErrorContains(t, err, `"relative/path" must be an absolute path`)
}
