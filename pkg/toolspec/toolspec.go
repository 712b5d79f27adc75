// Package toolspec holds the schemas of Herald's built-in tools, with Hermes'
// tool and argument names. The loop sends them to the model; the tool runner
// and memory service validate arguments against the same definitions.
package toolspec

import (
	"encoding/json"
	"sort"
)

// Spec is one tool's definition.
type Spec struct {
	Name        string
	Description string
	Parameters  map[string]any
	// ReadOnly tools never change anything and may run in parallel.
	ReadOnly bool
	// PathArg names the argument holding the file path, for path-scoped tools.
	PathArg string
	// Service that executes the tool: "toolrunner", "memory" or "loop".
	Service string
	// Idempotent tools are safe to run again after a crash mid-call.
	Idempotent bool
}

// ParametersJSON returns the JSON schema text.
func (s Spec) ParametersJSON() string {
	b, _ := json.Marshal(s.Parameters)
	return string(b)
}

func obj(required []string, props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func boolean(desc string) map[string]any {
	return map[string]any{"type": "boolean", "description": desc}
}
func integer(desc string) map[string]any {
	return map[string]any{"type": "integer", "description": desc}
}

var builtins = map[string]Spec{
	"terminal": {Name: "terminal", Service: "toolrunner",
		Description: "Run a shell command in the workspace and return its output and exit code.",
		Parameters: obj([]string{"command"}, map[string]any{
			"command": str("The shell command to run."),
			"timeout": integer("Seconds before the command is killed (default 180)."),
		})},
	"read_file": {Name: "read_file", Service: "toolrunner", ReadOnly: true, PathArg: "path", Idempotent: true,
		Description: "Read a text file from the workspace, with line numbers.",
		Parameters: obj([]string{"path"}, map[string]any{
			"path":   str("Path relative to the workspace."),
			"offset": integer("First line to read, 1-based (default 1)."),
			"limit":  integer("How many lines to read (default and maximum 2000)."),
		})},
	"write_file": {Name: "write_file", Service: "toolrunner", PathArg: "path", Idempotent: true,
		Description: "Create or overwrite a file in the workspace with the given content.",
		Parameters: obj([]string{"path", "content"}, map[string]any{
			"path":    str("Path relative to the workspace."),
			"content": str("The complete new content of the file."),
		})},
	"patch": {Name: "patch", Service: "toolrunner", PathArg: "path",
		Description: "Replace exact text in a workspace file. old_string must match the file exactly (whitespace included) and be unique unless replace_all is true.",
		Parameters: obj([]string{"path", "old_string", "new_string"}, map[string]any{
			"path":        str("Path relative to the workspace."),
			"old_string":  str("The exact text to replace."),
			"new_string":  str("The text to put in its place."),
			"replace_all": boolean("Replace every occurrence instead of requiring exactly one (default false)."),
		})},
	"search_files": {Name: "search_files", Service: "toolrunner", ReadOnly: true, PathArg: "path", Idempotent: true,
		Description: "Search the workspace: lines of files matching a regular expression, or (pattern \"*\" with file_glob) the files whose names match a glob. Results are capped.",
		Parameters: obj([]string{"pattern"}, map[string]any{
			"pattern":   str("A regular expression (RE2) searched in file contents; \"*\" with file_glob lists files by name."),
			"path":      str("Folder (or file) to search, relative to the workspace (default the whole workspace)."),
			"file_glob": str("Only files whose name matches this glob, e.g. \"*.go\"."),
		})},
	"todo": {Name: "todo", Service: "toolrunner", Idempotent: true,
		Description: "The session's task list. Without todos it returns the list; with todos it replaces the whole list.",
		Parameters: obj([]string{}, map[string]any{
			"todos": map[string]any{"type": "array", "description": "The complete new list.",
				"items": obj([]string{"id", "content", "status"}, map[string]any{
					"id":      str("A short stable id."),
					"content": str("What to do."),
					"status":  map[string]any{"type": "string", "enum": []string{"pending", "in_progress", "completed", "cancelled"}},
				})},
		})},
	"session_search": {Name: "session_search", Service: "memory", ReadOnly: true, Idempotent: true,
		Description: "Search the transcripts of past sessions (full text, ranked). Returns the best sessions, " +
			"each with the messages around the match. With no query, lists the most recent sessions.",
		Parameters: obj([]string{}, map[string]any{
			"query": str("Words or a phrase to look for."),
			"limit": integer("How many sessions to return (default 3, at most 10)."),
		})},
	"clarify": {Name: "clarify", Service: "toolrunner", Idempotent: true,
		Description: "Ask the user a question and wait for the answer. Use only when you cannot proceed without it.",
		Parameters: obj([]string{"question"}, map[string]any{
			"question": str("The question to ask."),
			"choices":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Suggested answers, if any."},
		})},
	// Re-running a program after a crash is safe for its tool calls: each has
	// a deterministic id and is answered from its stored result, never run twice.
	"execute_code": {Name: "execute_code", Service: "toolrunner", Idempotent: true,
		Description: "Run a Python 3 program in the workspace and get back only what it prints. " +
			"Inside it, `from herald_tools import terminal, read_file, write_file, patch, search_files`: each takes the tool's own " +
			"arguments as keyword arguments and returns the tool's result text; a failed call raises herald_tools.ToolError. " +
			"Use it to do many tool steps in one go (loops, filtering, aggregating); print only what you need.",
		Parameters: obj([]string{"code"}, map[string]any{
			"code": str("The Python 3 program to run."),
		})},
	"memory": {Name: "memory", Service: "memory",
		Description: "Durable memory across sessions: 'memory' holds your own notes, 'user' what you know about the user.",
		Parameters: obj([]string{"action", "target"}, map[string]any{
			"action":   map[string]any{"type": "string", "enum": []string{"add", "replace", "remove", "read"}},
			"target":   map[string]any{"type": "string", "enum": []string{"memory", "user"}},
			"content":  str("The entry to add, or the replacement text."),
			"old_text": str("A unique part of the entry to replace or remove."),
		})},
}

// Register adds or replaces a spec; services call it from init for the tools they own.
func Register(s Spec) { builtins[s.Name] = s }

// Quick reports whether name is a tool runner's tool that only reads the
// workspace (read_file, search_files): it runs no program and takes
// milliseconds, so runners take its calls beside their other calls, never
// behind a long command (pkg/bus ToolRead).
func Quick(name string) bool {
	s, ok := Lookup(name)
	return ok && s.ReadOnly && s.Service == "toolrunner"
}

// Lookup returns the spec of a tool.
func Lookup(name string) (Spec, bool) {
	s, ok := builtins[name]
	return s, ok
}

// All returns every spec, sorted by name so the tool list sent to the model
// is byte-for-byte stable (provider prefix caches depend on it).
func All() []Spec {
	out := make([]Spec, 0, len(builtins))
	for _, s := range builtins {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns every tool name, sorted.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Name)
	}
	return out
}
