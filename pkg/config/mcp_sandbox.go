package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// MCPSandbox is an MCP server's difference from the sandbox settings. A
// server runs in the tool runner's sandbox unless its entry says
// `sandbox: none`; `sandbox: {network: true}` lets one server reach the
// network when commands may not, and `read_only` adds host paths it may
// read (for instance an install folder the runner does not find itself).
type MCPSandbox struct {
	// None is `sandbox: none`: the server runs unconfined.
	None bool `yaml:"-"`
	// Network overrides sandbox.network for this server when set.
	Network *bool `yaml:"network"`
	// ReadOnly are extra host paths this server may read.
	ReadOnly []string `yaml:"read_only"`
}

// UnmarshalYAML takes either the word none or a mapping.
func (m *MCPSandbox) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != SandboxNone {
			return fmt.Errorf("line %d: an MCP server's sandbox is none or a mapping (network, read_only), got %q", n.Line, n.Value)
		}
		*m = MCPSandbox{None: true}
		return nil
	}
	type plain MCPSandbox
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*m = MCPSandbox(p)
	return nil
}

// MarshalYAML writes none back as the word.
func (m MCPSandbox) MarshalYAML() (any, error) {
	if m.None {
		return SandboxNone, nil
	}
	type plain MCPSandbox
	return plain(m), nil
}
