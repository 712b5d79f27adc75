package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// apiError is an error a client can act on, written in OpenAI's error shape
// {"error": {"message", "type", "code", "param"}}.
type apiError struct {
	status  int
	typ     string
	code    string
	message string
	// retryAfter, when set, is sent as Retry-After (429).
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.message }

// OpenAI's error types.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePermission     = "permission_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
)

func invalid(code, format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typeInvalidRequest, code: code, message: fmt.Sprintf(format, a...)}
}

func notFound(what, id string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, code: "not_found",
		message: fmt.Sprintf("no %s with id %q", what, id)}
}

func unauthorized(message string) *apiError {
	return &apiError{status: http.StatusUnauthorized, typ: typeAuthentication, code: "invalid_api_key", message: message}
}

func forbidden(code, format string, a ...any) *apiError {
	return &apiError{status: http.StatusForbidden, typ: typePermission, code: code, message: fmt.Sprintf(format, a...)}
}

func conflict(code, format string, a ...any) *apiError {
	return &apiError{status: http.StatusConflict, typ: typeInvalidRequest, code: code, message: fmt.Sprintf(format, a...)}
}

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// writeError answers err in OpenAI's error shape: an apiError as it says, any
// other error as a 500 whose message does not leak internals.
func (s *Service) writeError(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		// the cause names buckets, keys and subjects: the log's, not the client's
		s.log.Error().Err(err).Msg("api request failed")
		e = &apiError{status: http.StatusInternalServerError, typ: typeServer, code: "internal_error",
			message: "Herald could not complete the request; see the api service's log"}
		if errors.Is(err, errUnavailable) {
			e.status, e.code, e.message = http.StatusServiceUnavailable, "unavailable", errUnavailable.Error()
			e.retryAfter = retryAfter
		}
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(e.retryAfter.Round(time.Second), time.Second)/time.Second)))
	}
	writeJSON(w, e.status, errorBody{Error: errorDetail{Message: e.message, Type: e.typ, Code: e.code}})
}

// errUnavailable says the bus could not take the request now (503).
var errUnavailable = errors.New("Herald's message bus did not answer; try again")

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
