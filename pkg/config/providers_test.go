package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProviderProfileOverridesAreRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
model: {default: qwen3, provider: my-vllm, base_url: "http://gpu-box:9000/v1"}
providers:
  my-vllm:
    profile: vllm
    stream: false
    think_tags: false
    output_caps: {qwen3: 8192}
  groq: {reasoning_echo: none, usage: cumulative}
`), 0o644))
	cfg := Default()
	require.NoError(t, cfg.readFile(path, true))
	p := cfg.Providers["my-vllm"]
	require.Equal(t, "vllm", p.Profile)
	require.NotNil(t, p.Stream)
	require.False(t, *p.Stream)
	require.NotNil(t, p.ThinkTags)
	require.False(t, *p.ThinkTags)
	require.Nil(t, p.StreamOptions, "unset fields stay unset, so the profile's value holds")
	require.Equal(t, int64(8192), p.OutputCaps["qwen3"])
	require.Equal(t, "none", cfg.Providers["groq"].ReasoningEcho)
	require.Equal(t, "cumulative", cfg.Providers["groq"].Usage)
}
