package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/nats-io/nats.go/jetstream"
)

// scheduleRequest is POST /v1/schedules.
type scheduleRequest struct {
	Cron       string  `json:"cron"`
	TZ         string  `json:"tz"`
	Every      string  `json:"every"`
	At         string  `json:"at"`
	Prompt     string  `json:"prompt"`
	Tenant     string  `json:"tenant"`
	Model      string  `json:"model"`
	MaxCostUSD float64 `json:"max_cost_usd"`
	Missed     string  `json:"missed"`
}

func (s *Service) createSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req scheduleRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	sc := Schedule{Cron: req.Cron, TZ: req.TZ, Every: req.Every, At: req.At, Prompt: req.Prompt, Tenant: req.Tenant,
		Model: req.Model, MaxCostUSD: req.MaxCostUSD, Missed: req.Missed}
	if p.keyed() {
		if sc.Tenant != "" && sc.Tenant != p.key.Tenant {
			return forbidden("tenant_mismatch", "this key belongs to tenant %q; it cannot schedule work for tenant %q", p.key.Tenant, sc.Tenant)
		}
		sc.Tenant, sc.Bound, sc.KeyID = p.key.Tenant, true, p.key.ID
	}
	sc, err = AddSchedule(r.Context(), s.deps.JS, sc)
	if errors.Is(err, ErrInvalidSchedule) {
		return invalid("invalid_schedule", "%s", err)
	}
	if err != nil {
		return errors.Join(errUnavailable, err)
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Service) listSchedules(w http.ResponseWriter, r *http.Request, p principal) error {
	all, err := ListSchedules(r.Context(), s.deps.JS)
	if err != nil {
		return errors.Join(errUnavailable, err)
	}
	out := []Schedule{}
	for _, sc := range all {
		if visible(p, &sc) {
			out = append(out, sc)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
	return nil
}

func visible(p principal, sc *Schedule) bool {
	return !p.keyed() || (sc.Bound && sc.Tenant == p.key.Tenant)
}

// scheduleOf is the schedule of the request's id, if p may see it.
func (s *Service) scheduleOf(r *http.Request, p principal) (*Schedule, error) {
	id := r.PathValue("id")
	sc, err := getSchedule(r.Context(), s.runs.kv, id)
	if errors.Is(err, ErrNoSuchSchedule) || (err == nil && !visible(p, sc)) {
		return nil, notFound("schedule", id)
	}
	if err != nil {
		return nil, errors.Join(errUnavailable, err)
	}
	return sc, nil
}

func (s *Service) getScheduleRoute(w http.ResponseWriter, r *http.Request, p principal) error {
	sc, err := s.scheduleOf(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Service) removeSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.onSchedule(w, r, p, RemoveSchedule, "removed")
}

func (s *Service) pauseSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.onSchedule(w, r, p, PauseSchedule, "paused")
}

func (s *Service) resumeSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.onSchedule(w, r, p, ResumeSchedule, "active")
}

func (s *Service) onSchedule(w http.ResponseWriter, r *http.Request, p principal,
	op func(ctx context.Context, js jetstream.JetStream, id string) error, status string) error {
	sc, err := s.scheduleOf(r, p)
	if err != nil {
		return err
	}
	if err := op(r.Context(), s.deps.JS, sc.ID); err != nil {
		return errors.Join(errUnavailable, err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": sc.ID, "status": status})
	return nil
}
