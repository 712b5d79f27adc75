// Package scripted is Herald's only test double: a real HTTP server speaking
// the OpenAI chat-completions API (plain JSON and SSE streaming) whose answers
// come from a script. Tests and `herald demo` start it; no code path of Herald
// knows it is not a real provider.
//
// A Script maps each request to a Reply. Conversation answers with the n-th
// reply where n is the number of assistant messages already in the request, so
// a retried or redelivered request gets the same answer: the script depends on
// the history, not on how often it was called.
package scripted
