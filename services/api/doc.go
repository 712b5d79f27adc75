// Package api is Herald's HTTP front door: OpenAI-compatible Responses and
// Chat Completions routes, runs with resumable event streams (SSE whose ids
// are JetStream stream sequences), API keys bound to tenants, and admission
// (per key and per tenant concurrent runs).
//
// It owns its routes, its keys bucket and its runs bucket. It meets the rest
// of Herald only on the bus: it publishes tasks, interrupts and inputs, and
// reads session events and results from their streams, through pkg/bus and
// proto. It never imports another service and never touches a session's
// state or transcript.
package api
