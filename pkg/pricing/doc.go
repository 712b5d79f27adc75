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
// Dated prices (an entry in force from a `since:` date) fit the same model:
// a table then holds several Prices per model and Lookup takes the row's
// time; the entry used is one more part of Applied ("since=2026-01-01"), so
// a row still names everything that priced it.
//
// The package owns prices and arithmetic only: it does no I/O and knows no
// provider's wire format.
package pricing
