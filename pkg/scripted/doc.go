// Package scripted is Herald's only test double: a real HTTP server speaking
// the three provider APIs the gateway uses — OpenAI chat completions
// (/v1/chat/completions), the OpenAI Responses API (/v1/responses) and the
// Anthropic Messages API (/v1/messages), each as plain JSON and as SSE
// streams — whose answers come from a script. Tests and `herald demo` start
// it; no code path of Herald knows it is not a real provider.
//
// A Script maps each request to a Reply. Whatever the API, a request is
// presented to the script as chat-style Messages (system, user, assistant
// with tool calls, tool results), so one script serves every API mode.
// Conversation answers with the n-th reply where n is the number of assistant
// messages already in the request, so a retried or redelivered request gets
// the same answer: the script depends on the history, not on how often it
// was called.
//
// A Reply's Raw body (with its ContentType) replays a provider's answer byte
// for byte, as the gateway's conformance suite does with its fixtures.
//
// Replies can inject failures: an HTTP status and body, a raw (garbage)
// body, a delay, a connection dropped mid-answer (CutAfter) or a stream that
// goes silent (StallAfter).
package scripted
