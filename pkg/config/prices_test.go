package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDatedPricesLoadAndEveryOldFormStillDoes(t *testing.T) {
	cfg, err := loadYAML(t, `
pricing:
  old-model: {input: 1, output: 2}
  dated-once: {since: 2026-11-15, input: 3, output: 4}
  changed:
    - {input: 1, output: 2, cache_read: 0.1}
    - since: "2026-11-15T09:00:00Z"
      input: 1.5
      output: 3
      tiers: [{above_input_tokens: 200000, input: 3}]
`)
	require.NoError(t, err)
	require.Equal(t, 2.0, cfg.Pricing["old-model"].Output)
	require.Equal(t, time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), cfg.Pricing["dated-once"].Since)
	changed := cfg.Pricing["changed"]
	require.Equal(t, 1.5, changed.Input, "the latest entry")
	require.Len(t, changed.Dated, 2)
	require.Equal(t, 0.1, changed.Dated[0].CacheRead)
	require.Equal(t, time.Date(2026, 11, 15, 9, 0, 0, 0, time.UTC), changed.Dated[1].Since)
}

func TestDatedPricesAreCheckedEntryByEntry(t *testing.T) {
	_, err := loadYAML(t, `
pricing:
  m:
    - {input: 1}
    - {since: 2026-11-15, input: -1}
`)
	require.ErrorContains(t, err, "pricing.m: prices must not be negative")
	path := filepath.Join(t.TempDir(), "herald.yaml")
	require.NoError(t, os.WriteFile(path, []byte("pricing:\n  m: [{since: 2026-13-45, input: 1}]\n"), 0o644))
	cfg := Default()
	require.ErrorContains(t, cfg.readFile(path, true), `line 2: since: "2026-13-45" is neither a date`)

	unknown, err := UnknownKeys([]byte("pricing:\n  m:\n    - {input: 1}\n    - {since: 2026-11-15, inptu: 2}\n"))
	require.NoError(t, err)
	require.Len(t, unknown, 1)
	require.Equal(t, "pricing.m[1].inptu", unknown[0].Path)
	require.Equal(t, "pricing.m[1].input", unknown[0].Suggest)
}
