package proto

// Context files (issue 26): the workspace files folded into a session's
// system prompt come from the tool runner that owns the workspace, read
// confined to it, on request from the loop (bus.ContextFiles(pool)).

// ContextFileNames are the workspace files folded into the system prompt,
// in prompt order.
var ContextFileNames = []string{"AGENTS.md", "HERALD.md", ".cursorrules", "CLAUDE.md"}

// MaxContextFileBytes bounds one context file: a longer file is sent as its
// head (70%) and tail (20%) around a note, and no more than that is read
// from disk.
const MaxContextFileBytes = 20000

// ContextFilesRequest asks for a session's context files.
type ContextFilesRequest struct {
	SessionID string `json:"session_id"`
	// Tenant is the tenant the session is bound to; its Workspace then lies
	// in the tenant's folder, tenants/<tenant>/.
	Tenant string `json:"tenant,omitempty"`
	// Workspace is the session's folder under the runner's root, as its
	// tool calls name it.
	Workspace string `json:"workspace,omitempty"`
}

// ContextFile is one context file, already cut to MaxContextFileBytes.
type ContextFile struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// SkippedContextFile is a context file that was not read, and why.
type SkippedContextFile struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// ContextFilesReply answers a ContextFilesRequest.
type ContextFilesReply struct {
	Files   []ContextFile        `json:"files,omitempty"`
	Skipped []SkippedContextFile `json:"skipped,omitempty"`
	// Error says why the workspace could not be read at all.
	Error string `json:"error,omitempty"`
}
