// Package toolrunner executes the tool calls of agent sessions: terminal,
// file tools, search, todo, clarify and the tools of configured MCP servers.
// It owns the sandbox (every path inside the session's workspace, a scrubbed
// environment), approvals of dangerous commands, timeouts and output limits,
// the per-session circuit breaker, workspace checkpoints and crash safety
// (a call runs at most once; a call that may have started on a runner that
// died is reported as "outcome unknown" instead of being run twice).
//
// Any number of runner processes share one durable work queue per pool. The
// package talks to the rest of Herald only over the bus: it consumes
// TOOL_CALLS and publishes TOOL_RESULTS, session events and tool events. It
// must not touch the loop's session state, the memory service's calls
// (herald.memory.call.*) or any other service's streams.
package toolrunner
