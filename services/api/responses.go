package api

import "net/http"

// reasoningParam is the Responses API's reasoning option.
type reasoningParam struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

func (s *Service) createResponse(w http.ResponseWriter, r *http.Request, p principal) error {
	return nil
}
func (s *Service) getResponse(w http.ResponseWriter, r *http.Request, p principal) error { return nil }
func (s *Service) chatCompletions(w http.ResponseWriter, r *http.Request, p principal) error {
	return nil
}
