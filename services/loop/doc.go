// Package loop owns the agent state machine of every session: budgets,
// retries, exit reasons, tool-dispatch planning, prompt assembly, repeat
// detection and interrupts. It reacts to tasks, model responses, tool
// results, compression results and interrupts, and answers each with effects
// on the bus (model requests, tool calls, events, results).
//
// Durability: a session's truth is its transcript on the SESSIONS stream and a
// small state record in the herald_sessions KV bucket, advanced only by a
// compare-and-set on its revision. A handler computes its effects from those
// two alone and publishes them with deterministic message ids before it
// commits the state, so a handler killed at any instant is simply run again
// by the next delivery and produces the same effects, stored once.
//
// Budgets: every model call of a turn spends one iteration of the task's
// max_iterations (a child's is capped by delegation.max_iterations); a step
// whose only calls are to cheap tools (todo) gives its iteration back, and a
// hard cap of twice the budget bounds the model calls whatever the refunds.
// A spent budget earns one grace call with tools disabled and ends with
// max_iterations_reached. budget_exhausted is the money budget: a task's
// max_cost_usd, checked by the loop after each step and by the gateway
// before each call.
//
// Compression: before a model request whose estimated wire size (or the
// provider's last prompt_tokens) exceeds compression.threshold of the
// window, and after a context_overflow / payload_too_large error (at most 3
// per call), the history goes to the compressor. The compressed history
// continues under a child log <sid>-c<n> (State.LogSID, earlier logs in
// State.Logs, the result's continued_as); events, results and state keep the
// public session id. Two weak compressions in a row (< 10% saved) stop
// compression for the session with an event suggesting a new one.
//
// The loop never calls a model or runs a tool itself and never imports
// another service; it meets them only on the bus.
package loop
