package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Hermes' defaults that Herald keeps under the same keys (HERMES-TESTS.md
// legend, §6, §9 table (e), §15): max_iterations 90, api_max_retries 3,
// compression enabled at 50% with 3 head and 20 tail messages protected and
// a 0.2 target ratio, delegation 50 iterations and 3 children.
func TestParityDefaultsMatchHermes(t *testing.T) {
	c := Default()
	require.Equal(t, 90, c.Agent.MaxTurns)
	require.Equal(t, 3, c.Agent.APIMaxRetries)
	require.True(t, c.Compression.Enabled)
	require.Equal(t, 0.5, c.Compression.Threshold)
	require.Equal(t, 3, c.Compression.ProtectFirstN)
	require.Equal(t, 20, c.Compression.ProtectLastN)
	require.Equal(t, 0.2, c.Compression.TargetRatio)
	require.Equal(t, 50, c.Delegation.MaxIterations)
	require.Equal(t, 3, c.Delegation.MaxConcurrentChildren)
}
