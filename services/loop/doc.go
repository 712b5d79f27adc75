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
// The loop never calls a model or runs a tool itself and never imports
// another service; it meets them only on the bus.
package loop
