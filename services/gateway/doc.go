// Package gateway is Herald's provider gateway. It owns everything between an
// LLMRequest on the bus and the provider's HTTP API: the three API modes
// (chat_completions and codex_responses carried by openai-go, anthropic_messages
// over plain HTTP), each with one request encoder, the provider profiles that
// hold every provider's conventions (profile.go, profiles.go; docs/PROVIDERS.md),
// conversion to and from the internal message format, error
// classification, jittered backoff, the fallback chain and the cool-down of a
// rate-limited provider, credential handling, Anthropic prompt-caching
// markers, streaming deltas (scrubbed of memory context), usage
// normalisation, pricing, and money budgets.
//
// It consumes LLM_REQUESTS (durable "gateway") and produces an LLMResponse on
// the request's reply subject (holding the text already streamed when the
// answer came back empty or the call failed mid-stream, since only the
// gateway sees the stream), one UsageEvent per attempt on the tenant's
// usage subject, and delta/retry/fallback events on the session's events
// subject. It must not decide anything about the agent loop (the loop owns
// retries of empty answers, compression and exit reasons), must not write
// transcripts, and must never log or publish an API key.
package gateway
