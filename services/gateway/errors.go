package gateway

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	redaction "github.com/heraldrun/herald/pkg/redact"
)

// ErrorClass names why a provider call failed; the loop decides on it
// (auth → auth_failed, context_overflow/payload_too_large → compression).
type ErrorClass string

// Error classes of BEHAVIOURS.md, plus the two the gateway itself decides.
const (
	ClassTimeout         ErrorClass = "timeout"
	ClassRateLimit       ErrorClass = "rate_limit"
	ClassContextOverflow ErrorClass = "context_overflow"
	ClassPayloadTooLarge ErrorClass = "payload_too_large"
	ClassAuth            ErrorClass = "auth"
	ClassBilling         ErrorClass = "billing"
	ClassModelNotFound   ErrorClass = "model_not_found"
	ClassOverloaded      ErrorClass = "overloaded"
	ClassServerError     ErrorClass = "server_error"
	ClassNetwork         ErrorClass = "network"
	ClassFormatError     ErrorClass = "format_error"
	// ClassInvalidRequest: the provider refused the request itself (HTTP
	// 400/422: an unsupported parameter, a malformed message, Groq's
	// tool_use_failed); the same request will be refused again.
	ClassInvalidRequest   ErrorClass = "invalid_request"
	ClassContentPolicy    ErrorClass = "content_policy"
	ClassUnknown          ErrorClass = "unknown"
	ClassInterrupted      ErrorClass = "interrupted"
	ClassBudgetExceeded   ErrorClass = "budget_exceeded"
	maxProviderMessageLen            = 300
)

// Policy says what to do about a class of failure.
type Policy struct {
	// Retryable: the same provider may succeed on another attempt.
	Retryable bool
	// Compress: the history must shrink before any provider can succeed.
	Compress bool
	// Fallback: the next provider of the chain should serve the call once
	// this one gives up (at once when the error is not retryable).
	Fallback bool
}

var policies = map[ErrorClass]Policy{
	ClassTimeout:         {Retryable: true, Fallback: true},
	ClassRateLimit:       {Retryable: true, Fallback: true},
	ClassContextOverflow: {Compress: true},
	ClassPayloadTooLarge: {Compress: true},
	ClassAuth:            {Fallback: true},
	ClassBilling:         {Fallback: true},
	ClassModelNotFound:   {Fallback: true},
	ClassOverloaded:      {Retryable: true, Fallback: true},
	ClassServerError:     {Retryable: true, Fallback: true},
	ClassNetwork:         {Retryable: true, Fallback: true},
	ClassFormatError:     {Retryable: true, Fallback: true},
	ClassInvalidRequest:  {Fallback: true},
	ClassContentPolicy:   {},
	ClassUnknown:         {Retryable: true, Fallback: true},
	ClassInterrupted:     {},
	ClassBudgetExceeded:  {},
}

// PolicyOf returns the policy of class (unknown classes are treated as unknown).
func PolicyOf(class ErrorClass) Policy {
	if p, ok := policies[class]; ok {
		return p
	}
	return policies[ClassUnknown]
}

// attemptError is one failed attempt, classified. Its message is safe to show
// and publish: it names the provider and never holds a credential.
type attemptError struct {
	class      ErrorClass
	policy     Policy
	status     int
	retryAfter time.Duration
	detail     string
	cause      error
}

func (e *attemptError) Error() string {
	if e.status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %s", e.class, e.status, e.detail)
	}
	return fmt.Sprintf("%s: %s", e.class, e.detail)
}

func (e *attemptError) Unwrap() error { return e.cause }

func newAttemptError(class ErrorClass, detail string, cause error) *attemptError {
	return &attemptError{class: class, policy: PolicyOf(class), detail: detail, cause: cause}
}

// errInterrupted is the cause of a call's context cancelled by an interrupt.
var errInterrupted = errors.New("interrupted by the user")

// secretPattern finds things that look like API keys in provider messages.
var secretPattern = regexp.MustCompile(`(sk-|sk_|key-|AIza)[A-Za-z0-9_\-]{8,}`)

// redact removes key, any run of 12 or more of its characters (a provider
// echoing it without its prefix), and anything shaped like a key from s.
func redact(s, key string) string {
	s = redaction.New(key).String(s)
	return secretPattern.ReplaceAllString(s, "[redacted]")
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
