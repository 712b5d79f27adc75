package api

import (
	"fmt"
	"net/http"
)

// handlerFunc is a route's handler: it acts for p and returns an error
// instead of writing one, so every error takes OpenAI's shape.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p principal) error

func (s *Service) routes() {
	s.mux = http.NewServeMux()
	route := func(pattern string, h handlerFunc) { s.mux.Handle(pattern, s.authorized(h)) }
	route("POST /v1/runs", s.createRun)
	route("GET /v1/runs/{id}", s.getRun)
	route("GET /v1/runs/{id}/events", s.streamRunEvents)
	route("POST /v1/runs/{id}/cancel", s.cancelRun)
	route("POST /v1/runs/{id}/input", s.inputRun)
	route("POST /v1/responses", s.createResponse)
	route("GET /v1/responses/{id}", s.getResponse)
	route("POST /v1/chat/completions", s.chatCompletions)
	route("POST /v1/schedules", s.createSchedule)
	route("GET /v1/schedules", s.listSchedules)
	route("GET /v1/schedules/{id}", s.getScheduleRoute)
	route("DELETE /v1/schedules/{id}", s.removeSchedule)
	route("POST /v1/schedules/{id}/pause", s.pauseSchedule)
	route("POST /v1/schedules/{id}/resume", s.resumeSchedule)
	route("/v1/", func(w http.ResponseWriter, r *http.Request, _ principal) error {
		return &apiError{status: http.StatusNotFound, typ: typeInvalidRequest, code: "unknown_route",
			message: fmt.Sprintf("Herald's API has no route %s %s (see docs/API.md)", r.Method, r.URL.Path)}
	})
}

// authorized runs h for the request's principal, and writes its error.
func (s *Service) authorized(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody+1)
		p, err := s.authenticate(r)
		if err == nil {
			err = h(w, r, p)
		}
		if err != nil {
			s.writeError(w, err)
		}
	})
}
