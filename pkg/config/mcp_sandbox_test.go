package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMCPServerSandboxIsNoneOrAnOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
mcp_servers:
  plain: {command: mcp-plain}
  api: {command: mcp-api, sandbox: {network: true, read_only: [/opt/api-server]}}
  legacy: {command: mcp-legacy, sandbox: none}
`), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	require.NoError(t, cfg.Validate())
	require.Equal(t, MCPSandbox{}, cfg.MCPServers["plain"].Sandbox, "sandboxed with the general settings")
	api := cfg.MCPServers["api"].Sandbox
	require.False(t, api.None)
	require.NotNil(t, api.Network)
	require.True(t, *api.Network)
	require.Equal(t, []string{"/opt/api-server"}, api.ReadOnly)
	require.True(t, cfg.MCPServers["legacy"].Sandbox.None)

	require.NoError(t, os.WriteFile(path, []byte("mcp_servers:\n  x: {command: y, sandbox: off}\n"), 0o644))
	bad := Default()
	require.ErrorContains(t, bad.readFile(path, true), `sandbox is none or a mapping (network, read_only), got "off"`)

	cfg = Default()
	cfg.MCPServers = map[string]MCPServer{"x": {Command: "y", Sandbox: MCPSandbox{ReadOnly: []string{"node_modules"}}}}
	require.ErrorContains(t, cfg.Validate(), `mcp_servers.x.sandbox.read_only: "node_modules" is not an absolute path`)
}
