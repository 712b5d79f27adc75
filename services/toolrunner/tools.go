package toolrunner

import (
	"context"
	"errors"

	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// Statuses of a ToolResult.
const (
	statusOK      = "ok"
	statusError   = "error"
	statusTimeout = "timeout"
	statusDenied  = "denied"
	statusUnknown = "unknown_outcome"
)

// call is one tool call being executed.
type call struct {
	req  *heraldpb.ToolCallRequest
	spec toolspec.Spec
	run  tool
	ws   workspace
	// delivered counts the deliveries of the call's message (of its
	// execute_code program's, for a call the program made).
	delivered uint64
}

// outcome is what a tool produced; it becomes the ToolResult.
type outcome struct {
	content string
	status  string
	// correctable marks a mistake in the call the model can fix itself
	// (bad arguments); it does not count against the circuit breaker.
	correctable bool
}

func (o outcome) isError() bool { return o.status != statusOK }

func ok(content string) outcome { return outcome{content: content, status: statusOK} }

// failed turns an error into the result the model reads.
func failed(err error) outcome {
	var te *toolError
	if errors.As(err, &te) {
		return outcome{content: te.msg, status: te.status, correctable: te.correctable}
	}
	if errors.Is(err, ErrOutsideWorkspace) {
		return outcome{content: "refused: " + err.Error(), status: statusDenied}
	}
	return outcome{content: "error: " + err.Error(), status: statusError}
}

// tool executes one call.
type tool func(ctx context.Context, c *call) outcome

// builtinTools are the tools this package implements, by name.
func (s *Service) builtinTools() map[string]tool {
	return map[string]tool{
		"terminal":     s.terminal,
		"read_file":    s.readFile,
		"write_file":   s.writeFile,
		"patch":        s.patch,
		"search_files": s.searchFiles,
		"todo":         s.todo,
		"clarify":      s.clarify,
		"execute_code": s.executeCode,
	}
}

// mutatesFiles reports whether a tool changes the workspace (checkpointed first).
func mutatesFiles(name string) bool {
	return name == "write_file" || name == "patch"
}
