package toolrunner

import "errors"

// Sentinel errors, tested with errors.Is.
var (
	// ErrOutsideWorkspace: a path resolves outside the session's workspace.
	ErrOutsideWorkspace = errors.New("path is outside the workspace")
	// ErrInvalidArguments: a call's arguments do not match the tool's schema.
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrUnknownTool: no tool of that name is offered by this runner.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrMalformedCall: a call lacks what every call must carry.
	ErrMalformedCall = errors.New("malformed tool call")
	// ErrNoCheckpoint: there is no checkpoint to roll back to.
	ErrNoCheckpoint = errors.New("no checkpoint")
)

// toolError is a failure the model should read: it becomes an error result
// rather than a retry or a dead letter.
type toolError struct {
	status      string
	msg         string
	correctable bool
}

func (e *toolError) Error() string { return e.msg }
