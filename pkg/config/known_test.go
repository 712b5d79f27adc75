package config

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestUnknownKeysNamesTyposWithTheNearestKey(t *testing.T) {
	keys, err := UnknownKeys([]byte(`
modle: gpt-4o
agent: {max_turn: 5, api_max_retries: 2}
model: {default: m, provder: openai}
mcp_servers:
  files: {comand: srv, args: [a], sandbox: {network: true, readonly: [/x]}}
  legacy: {command: old, sandbox: none}
fallback_providers:
  - {provider: anthropic, model: m, api_key: secret}
pricing: {my-model: {input: 1, ouput: 2}}
sandbox: {pools: {gpu: {network: true, bogus: 1}}}
retry: {base_delay: 1s}
budgets: {tenants: {acme: 5}}
`))
	require.NoError(t, err)
	got := map[string]string{}
	for _, k := range keys {
		got[k.Path] = k.Suggest
		require.Positive(t, k.Line)
	}
	require.Equal(t, map[string]string{
		"modle":                              "model",
		"agent.max_turn":                     "agent.max_turns",
		"model.provder":                      "model.provider",
		"mcp_servers.files.comand":           "mcp_servers.files.command",
		"mcp_servers.files.sandbox.readonly": "mcp_servers.files.sandbox.read_only",
		"fallback_providers[0].api_key":      "",
		"pricing.my-model.ouput":             "pricing.my-model.output",
		"sandbox.pools.gpu.bogus":            "",
	}, got)
	require.Equal(t, "agent.max_turn (line 3): did you mean agent.max_turns?", keys[1].String())
}

// The known keys are Config's yaml tags: every documented key of a full
// configuration is known, and a field added to Config (by anyone) is too.
func TestUnknownKeysKnowsEveryFieldOfConfig(t *testing.T) {
	data, err := yaml.Marshal(Default())
	require.NoError(t, err)
	keys, err := UnknownKeys(data)
	require.NoError(t, err)
	require.Empty(t, keys, "the defaults written back as YAML:\n%s", data)
	fields := yamlFields(reflect.TypeOf(file{}))
	for i := 0; i < reflect.TypeOf(Config{}).NumField(); i++ {
		f := reflect.TypeOf(Config{}).Field(i)
		if tag := f.Tag.Get("yaml"); tag != "-" && tag != "" {
			require.Contains(t, fields, tag, "field %s", f.Name)
		}
	}
	require.Contains(t, fields, "model")
}

func TestUnknownKeysRejectsBrokenYAML(t *testing.T) {
	_, err := UnknownKeys([]byte("agent: {max_turns: 5\n"))
	require.Error(t, err)
}
