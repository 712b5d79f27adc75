package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// statusError is a provider's non-2xx answer, captured before any SDK parses
// (or fails to parse) its body, so every API mode is classified alike.
type statusError struct {
	status int
	body   string
	header http.Header
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, providerMessage(e.body))
}

// formatError marks a response the gateway could not make sense of.
type formatError struct{ reason string }

func (e *formatError) Error() string { return e.reason }

func garbage(format string, a ...any) error { return &formatError{reason: fmt.Sprintf(format, a...)} }

// Classify turns any failure of a provider call into an error class.
func Classify(err error) ErrorClass { return classify(err).class }

func classify(err error) *attemptError {
	var ae *attemptError
	var se *statusError
	var fe *formatError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &se):
		return classifyStatus(se)
	case errors.As(err, &fe):
		return newAttemptError(ClassFormatError, "the provider sent a response that could not be read: "+fe.reason, err)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return newAttemptError(ClassTimeout, "the provider did not answer in time", err)
	case isDecodeError(err):
		return newAttemptError(ClassFormatError, "the provider sent a response that could not be read", err)
	case isNetwork(err):
		return newAttemptError(ClassNetwork, "the connection to the provider failed: "+networkReason(err), err)
	default:
		return newAttemptError(ClassUnknown, truncate(err.Error(), maxProviderMessageLen), err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isNetwork(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE)
}

func networkReason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection closed before the response was complete"
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return "DNS lookup failed for " + de.Name
	}
	return "transport error"
}

func isDecodeError(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"parsing response json", "expected destination type", "unexpected end of json", "invalid character", "cannot unmarshal"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// classifyStatus reads the status first, then the provider's own words,
// since providers reuse 400 and 429 for very different conditions.
func classifyStatus(se *statusError) *attemptError {
	msg := providerMessage(se.body)
	low := strings.ToLower(se.body)
	class := statusClass(se.status, low)
	ae := newAttemptError(class, msg, se)
	ae.status = se.status
	switch class {
	case ClassRateLimit:
		ae.retryAfter = retryAfter(se.header, time.Now())
		if ae.retryAfter == 0 {
			ae.retryAfter = rateLimitReset(se.header, low)
		}
	case ClassOverloaded:
		// an overloaded provider may say when to come back (Retry-After on a
		// 503, as HTTP defines it); the SDKs wait that long before retrying
		ae.retryAfter = retryAfter(se.header, time.Now())
	}
	return ae
}

// statusClass follows the order of Hermes' classifier (agent/error_classifier.py,
// HERMES-TESTS.md §8 table (a)) where the two agree: a refusal first, then
// what the status and the provider's words say about money, limits, size
// and the request itself.
func statusClass(status int, body string) ErrorClass {
	switch {
	case status < 500 && containsAny(body, contentPolicyPhrases):
		return ClassContentPolicy
	case (status == http.StatusPaymentRequired || status == 0) && containsAny(body, usageLimitPhrases) && containsAny(body, transientPhrases):
		return ClassRateLimit // a periodic usage cap that resets, not an empty wallet
	case status == http.StatusPaymentRequired || containsAny(body, billingPhrases) || (status == 0 && containsAny(body, usageLimitPhrases)):
		return ClassBilling
	case status == 0 && containsAny(body, authPhrases):
		return ClassAuth // an error event inside a stream has no status of its own
	case status == http.StatusTooManyRequests:
		return ClassRateLimit
	case status == http.StatusUnauthorized || status == http.StatusForbidden || (status == http.StatusBadRequest && containsAny(body, authPhrases)):
		return ClassAuth
	case status < 500 && containsAny(body, unsupportedParamPhrases):
		return ClassInvalidRequest
	case status < 500 && containsAny(body, contextOverflowPhrases):
		return ClassContextOverflow
	case status < 500 && containsAny(body, rateLimitPhrases):
		return ClassRateLimit
	case status == http.StatusRequestEntityTooLarge:
		return ClassPayloadTooLarge
	case status == http.StatusNotFound || (status < 500 && containsAny(body, modelNotFoundPhrases)):
		return ClassModelNotFound
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return ClassTimeout
	case (status == 500 || status == 502) && containsAny(body, unsupportedParamPhrases):
		return ClassInvalidRequest // a router passing on the upstream's refusal of the request
	case status == http.StatusServiceUnavailable || status == 529 || strings.Contains(body, "overloaded"):
		return ClassOverloaded
	case status >= 500 || (status == 0 && containsAny(body, serverErrorPhrases)):
		return ClassServerError
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return ClassInvalidRequest
	default:
		return ClassUnknown
	}
}

var (
	contextOverflowPhrases = []string{"context length", "context_length", "maximum context", "context window",
		"prompt is too long", "input is too long", "too many tokens", "exceeds the context", "reduce the length",
		"maximum number of tokens", "context size", "token limit", "prompt exceeds max length", "max_model_len",
		"prompt length", "maximum model length", "truncating input", "slot context", "n_ctx_slot",
		"超过最大长度", "上下文长度", "max input token", "exceeds the maximum number of input tokens"}
	billingPhrases = []string{"insufficient_quota", "billing", "credit balance", "payment required", "exceeded your current quota",
		"insufficient credits", "insufficient balance", "credits exhausted", "credits have been exhausted", "no usable credits",
		"top up your credits", "account is deactivated", "plan does not include", "out of funds", "run out of funds",
		"balance_depleted", "model_not_supported_on_free_tier", "not available on the free tier", "spending limit",
		"key limit exceeded", "余额不足"}
	usageLimitPhrases = []string{"usage limit", "quota", "limit exceeded"}
	// authPhrases: Gemini answers a bad key with 400 INVALID_ARGUMENT "API key not valid".
	authPhrases = []string{"invalid api key", "invalid_api_key", "authentication", "unauthorized", "invalid token",
		"token expired", "token revoked", "access denied", "api key not valid", "api_key_invalid"}
	// serverErrorPhrases name a failure reported inside a 200 stream
	// (OpenRouter's mid-stream error, a failed Responses API response).
	serverErrorPhrases = []string{"server_error", "internal_error", "internal server error"}
	transientPhrases   = []string{"try again", "retry", "resets at", "reset in", "wait", "requests remaining", "periodic", "window"}
	rateLimitPhrases   = []string{"rate limit", "rate_limit", "too many requests", "throttled", "requests per minute",
		"tokens per minute", "requests per day", "try again in", "please retry after", "resource_exhausted",
		"rate increased too quickly", "throttlingexception", "too many concurrent requests", "servicequotaexceededexception"}
	unsupportedParamPhrases = []string{"unknown parameter", "unsupported parameter", "unrecognized request argument",
		"unknown_parameter", "unsupported_parameter"}
	modelNotFoundPhrases = []string{"model_not_found", "does not exist", "unknown model", "no such model", "model not found",
		"is not a valid model", "invalid model", "unsupported model"}
	contentPolicyPhrases = []string{"content_policy", "content_filter", "content policy", "safety system", "flagged",
		"violates our usage policies", "responsibleaipolicyviolation", "trusted access for cyber"}
)

func containsAny(s string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// retryAfter reads Retry-After (seconds or an HTTP date) and retry-after-ms;
// 0 when absent, unreadable or beyond what the gateway is willing to wait.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			d = time.Duration(s * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	if d <= 0 || d > maxRetryAfter {
		return 0
	}
	return d
}

// rateLimitReset reads OpenAI's x-ratelimit-reset-requests and
// x-ratelimit-reset-tokens ("1s", "6m0s", "20ms": when the limit's window
// refills; https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers):
// the one the error names (requests per minute, tokens per minute), else
// the later of the two. 0 when absent or beyond what the gateway waits.
func rateLimitReset(h http.Header, body string) time.Duration {
	reset := func(name string) time.Duration {
		d, err := time.ParseDuration(strings.TrimSpace(h.Get(name)))
		if err != nil || d <= 0 {
			return 0
		}
		return d
	}
	requests, tokens := reset("X-Ratelimit-Reset-Requests"), reset("X-Ratelimit-Reset-Tokens")
	var d time.Duration
	switch {
	case strings.Contains(body, "(rpm)") || strings.Contains(body, "requests per"):
		d = requests
	case strings.Contains(body, "(tpm)") || strings.Contains(body, "tokens per"):
		d = tokens
	}
	if d == 0 {
		d = max(requests, tokens)
	}
	if d > maxRetryAfter {
		return 0
	}
	return d
}

// providerMessage extracts the human part of an error body: the JSON error
// message of OpenAI- and Anthropic-style bodies, or a note about an HTML page.
func providerMessage(body string) string {
	trimmed := strings.TrimSpace(body)
	if trimmed == "" {
		return "no error message in the response"
	}
	var list []json.RawMessage
	if strings.HasPrefix(trimmed, "[") && json.Unmarshal([]byte(trimmed), &list) == nil && len(list) > 0 {
		return providerMessage(string(list[0])) // Gemini's OpenAI endpoint wraps its error in a list
	}
	var shaped struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal([]byte(trimmed), &shaped) == nil {
		var inner struct {
			Message json.RawMessage `json:"message"`
		}
		_ = json.Unmarshal(shaped.Error, &inner)
		for _, raw := range []json.RawMessage{inner.Message, shaped.Error, shaped.Message, shaped.Detail} {
			if m := strings.TrimSpace(messageText(raw)); m != "" {
				return truncate(m, maxProviderMessageLen)
			}
		}
	}
	if strings.HasPrefix(trimmed, "<") {
		return "the provider answered with an HTML page instead of JSON" + htmlTitle(trimmed)
	}
	return truncate(trimmed, maxProviderMessageLen)
}

func htmlTitle(page string) string {
	low := strings.ToLower(page)
	i := strings.Index(low, "<title>")
	j := strings.Index(low, "</title>")
	if i < 0 || j <= i {
		return ""
	}
	return " (" + truncate(page[i+len("<title>"):j], 100) + ")"
}

// messageText reads an error message that is a string or, as Mistral and
// other pydantic-validated servers send it, a list of field errors
// ({"detail":[{"loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]}).
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	type fieldError struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	var list []fieldError
	var wrapped struct {
		Detail []fieldError `json:"detail"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Detail) > 0 {
		list = wrapped.Detail
	} else if json.Unmarshal(raw, &list) != nil {
		return ""
	}
	var parts []string
	for _, e := range list {
		loc := make([]string, 0, len(e.Loc))
		for _, l := range e.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		parts = append(parts, strings.TrimSpace(strings.Join(loc, ".")+": "+e.Msg))
	}
	return strings.Join(parts, "; ")
}
