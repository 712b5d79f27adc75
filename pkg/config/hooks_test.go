package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHooksAndCodeExecutionSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
hooks: {timeout_ms: 100, pre_tool_call: required}
code_execution: {timeout: 60, max_tool_calls: 10, max_output_chars: 2000, python: /opt/py/bin/python3}
`), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	require.NoError(t, cfg.Validate())
	require.Equal(t, Hooks{TimeoutMS: 100, PreToolCall: HookRequired}, cfg.Hooks)
	require.Equal(t, CodeExecution{Timeout: 60, MaxToolCalls: 10, MaxOutputChars: 2000, Python: "/opt/py/bin/python3"}, cfg.CodeExecution)

	cfg.Hooks.PreToolCall = "mandatory"
	cfg.CodeExecution.MaxToolCalls = -1
	err := cfg.Validate()
	require.ErrorContains(t, err, `hooks.pre_tool_call must be optional or required, got "mandatory"`)
	require.ErrorContains(t, err, "code_execution limits must not be negative")
}
