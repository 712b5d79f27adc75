package pricing

import (
	"math"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// ShareNano prices part of one request's prompt in nano-USD: share's input,
// cache-read and cache-write tokens at the token prices in force for the
// whole request, whose prompt was prompt tokens (so the share is priced in
// the request's tier, not a tier of its own size). No fee applies: fees are
// the request's, not any part's.
func (p Price) ShareNano(prompt int64, share *heraldpb.Usage) uint64 {
	in, _, read, write, _ := p.tokenPrices(prompt)
	tokens := float64(share.GetInputTokens())*in + float64(share.GetCacheReadTokens())*read +
		float64(share.GetCacheWriteTokens())*write
	return uint64(math.Round(tokens * 1000))
}
