package compressor

import "errors"

// Errors of a compression request.
var (
	// ErrInvalidRequest: the request cannot be compressed as sent (dead-lettered).
	ErrInvalidRequest = errors.New("invalid compress request")
	// ErrSummaryFailed: the model's summary was unusable; the deterministic
	// summary replaces it.
	ErrSummaryFailed = errors.New("summary call failed")
	// ErrSummaryTimeout: the gateway did not answer in time.
	ErrSummaryTimeout = errors.New("summary call timed out")
)
