// Package pricing is Herald's one price model: what a model call costs from
// the usage the provider reported and a price table. The gateway prices
// every attempt with it when it bills; accounting can reprice stored rows
// with it, because a row's token counts and its price_source (which names
// the tier and the fees applied, see Applied) are all it needs.
//
// A Price is USD per million tokens by class (input, output, cache read,
// cache write), plus a fee per request, named fees per unit the provider
// reports (web searches), and tiers that replace the token prices when the
// prompt is larger than a threshold. Output tokens always include reasoning
// tokens, so reasoning is never priced on its own.
//
// The package owns prices and arithmetic only: it does no I/O and knows no
// provider's wire format.
package pricing
