package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/stretchr/testify/require"
)

// docs/CONFIG.md's example herald.yaml uses only keys Herald reads: the
// check that names typos at start would name none of them.
func TestConfigPageNamesOnlyKnownKeys(t *testing.T) {
	page, err := os.ReadFile("../../docs/CONFIG.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(page), -1)
	require.NotEmpty(t, blocks)
	for _, b := range blocks {
		keys, err := config.UnknownKeys([]byte(b[1]))
		require.NoError(t, err, b[1])
		require.Empty(t, keys, b[1])
	}
}
