package memory

import "errors"

// Errors a memory tool call reports to the model (as a tool result, not a
// dead letter: the model can correct itself).
var (
	ErrInvalidArguments = errors.New("invalid arguments")
	ErrLimitExceeded    = errors.New("store limit exceeded")
	ErrInjection        = errors.New("content looks like a prompt injection")
	ErrNoMatch          = errors.New("no entry matches old_text")
	ErrAmbiguous        = errors.New("old_text matches more than one entry")
	ErrUnknownTool      = errors.New("unknown tool")
)

// errStoreBusy is returned when compare-and-set keeps losing to other writers.
var errStoreBusy = errors.New("memory store busy: too many concurrent updates")
