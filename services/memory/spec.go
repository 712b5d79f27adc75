package memory

import "github.com/heraldrun/herald/pkg/toolspec"

// SessionSearchSpec is session_search's schema (Hermes' names). The memory
// service executes it; it is registered so a binary that composes this
// service offers it to the model.
var SessionSearchSpec = toolspec.Spec{
	Name: ToolSessionSearch, Service: "memory", ReadOnly: true, Idempotent: true,
	Description: "Search the transcripts of past sessions (full text, ranked). Returns the best sessions, " +
		"each with the messages around the match. With no query, lists the most recent sessions.",
	Parameters: map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{},
		"properties": map[string]any{
			"query": map[string]any{"type": "string", "description": "Words or a phrase to look for."},
			"limit": map[string]any{"type": "integer", "description": "How many sessions to return (default 3, at most 10)."},
		},
	},
}

func init() {
	if _, ok := toolspec.Lookup(ToolSessionSearch); !ok {
		toolspec.Register(SessionSearchSpec)
	}
}
