// Package pricing is Herald's one price model: what a model call costs from
// the usage the provider reported and a price table. The gateway prices
// every attempt with it when it bills; `herald cost reprice` prices stored
// rows again with it, because a row's token counts, its time and its
// price_source (which names the entry, the tier and the fees applied, see
// Applied) are all it needs.
//
// A Price is USD per million tokens by class (input, output, cache read,
// cache write), plus a fee per request, named fees per unit the provider
// reports (web searches), and tiers that replace the token prices when the
// prompt is larger than a threshold. Output tokens always include reasoning
// tokens, so reasoning is never priced on its own.
//
// Prices have dates: an entry may be in force from a `since:` time, and a
// model may have several (dated.go). A Table looks a model up at a time:
// herald.yaml's entries, then imported ones (catalogue.go reads LiteLLM's
// and genai-prices' catalogues; `herald prices import` keeps them on the
// bus), then the built-in list; the entry used is one more part of the
// row's price_source ("config;since=2026-11-15"), so a row still names
// everything that priced it.
//
// The package owns prices and arithmetic only: it does no I/O and knows no
// provider's wire format.
package pricing
