package models

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Hermes' rough token estimate (HERMES-TESTS.md §9 table (e)): characters
// divided by 4, used where the provider reported no usage.
func TestParityTokenEstimateIsCharsOverFour(t *testing.T) {
	require.Equal(t, int64(1000+1), EstimateTokens(4000))
	require.Equal(t, int64(25_000+1), EstimateTokens(100_000))
}
