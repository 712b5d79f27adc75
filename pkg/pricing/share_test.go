package pricing

import (
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestShareIsPricedInTheTierOfItsRequest(t *testing.T) {
	p := Price{Input: 1, CacheRead: 0.5, CacheWrite: 1.25,
		Tiers: []Tier{{AboveInputTokens: 200_000, Input: f64(2), CacheRead: f64(1)}}}
	share := &heraldpb.Usage{InputTokens: 1000, CacheReadTokens: 2000, CacheWriteTokens: 400}
	require.Equal(t, uint64(1000*1000+2000*500+400*1250), p.ShareNano(10_000, share), "base prices in a small request")
	require.Equal(t, uint64(1000*2000+2000*1000+400*1250), p.ShareNano(300_000, share), "the tier of the whole request, though the share alone is small")
}
