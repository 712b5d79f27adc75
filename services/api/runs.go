package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
)

// maxBody bounds a request body: a prompt's own limit and room for the rest.
const maxBody = proto.MaxPromptBytes + 64<<10

// retryAfter is what a run refused for its concurrency limit is told to
// wait; queueFullRetryAfter is for one refused because too many wait.
const (
	retryAfter          = time.Second
	queueFullRetryAfter = 10 * time.Second
)

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// runView is a run as GET /v1/runs/{id} shows it.
type runView struct {
	RunID     string        `json:"run_id"`
	SessionID string        `json:"session_id"`
	Tenant    string        `json:"tenant"`
	Status    string        `json:"status"`
	CreatedAt time.Time     `json:"created_at"`
	Position  int           `json:"queue_position,omitempty"`
	Result    *proto.Result `json:"result,omitempty"`
}

func (s *Service) createRun(w http.ResponseWriter, r *http.Request, p principal) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	task, err := proto.DecodeTask(body)
	if err != nil {
		return invalid("invalid_task", "%s", err)
	}
	if task.ParentSessionID != "" {
		return invalid("invalid_task", `field "parent_session_id" is set by Herald's loop only`)
	}
	if task.APIKeyID != "" || task.ScheduleID != "" {
		return invalid("invalid_task", `fields "api_key_id" and "schedule_id" are set by Herald from the key and schedule that start a run`)
	}
	id := task.TaskID
	if id == "" {
		id = newID("run_")
	} else if !proto.IsToken(id) {
		return invalid("invalid_task", `field "task_id" may hold only letters, digits, '-' and '_' (at most 128)`)
	}
	rn := &run{ID: id, Kind: kindRun, Task: task}
	pos, err := s.startRun(r.Context(), p, rn)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runView{RunID: rn.ID, SessionID: rn.SessionID, Tenant: rn.Tenant, Status: rn.Status,
		CreatedAt: rn.CreatedAt, Position: pos})
	return nil
}

// startRun binds the run to p's tenant, claims its session, admits it and
// publishes its task, or queues it; on any refusal nothing is left behind.
// It returns the run's queue position (0: started).
func (s *Service) startRun(ctx context.Context, p principal, rn *run) (int, error) {
	if err := s.bind(p, rn); err != nil {
		return 0, err
	}
	fresh := rn.Task.SessionID == ""
	if fresh {
		rn.Task.SessionID = newID("sess_")
	}
	rn.SessionID, rn.Task.TaskID, rn.CreatedAt = rn.Task.SessionID, rn.ID, time.Now().UTC()
	claimed, err := s.runs.claimSession(ctx, p, rn.SessionID, rn.Tenant, fresh)
	if err != nil {
		return 0, err
	}
	// a refusal from here on gives back the session this request claimed
	unclaim := func() {
		if claimed {
			s.runs.unclaimSession(context.WithoutCancel(ctx), rn.SessionID)
		}
	}
	t := ticket{runID: rn.ID, keyID: rn.KeyID, keyLimit: p.key.MaxConcurrent, tenant: rn.Tenant, order: rn.CreatedAt.UnixNano()}
	pos, ready, err := s.adm.admit(t)
	if err != nil {
		unclaim()
		return 0, s.admissionRefused(rn, err)
	}
	rn.Status = StatusRunning
	if pos > 0 {
		rn.Status = StatusQueued
	}
	if err := s.runs.create(ctx, rn); err != nil {
		s.unadmit(rn.ID)
		unclaim()
		return 0, err
	}
	if pos > 0 {
		s.announce(ctx, rn, pos)
		s.wg.Add(1)
		go s.await(rn, ready)
		return pos, nil
	}
	if err := s.publishTask(ctx, rn); err != nil {
		s.unadmit(rn.ID)
		s.runs.remove(context.WithoutCancel(ctx), rn.ID)
		unclaim()
		return 0, errors.Join(errUnavailable, err)
	}
	return 0, nil
}

// admissionRefused is what a client is told of a run admission refused.
func (s *Service) admissionRefused(rn *run, err error) error {
	switch {
	case errors.Is(err, errOverLimit):
		return &apiError{status: http.StatusTooManyRequests, typ: typeRateLimit, code: "concurrency_limit_exceeded",
			message:    fmt.Sprintf("tenant %q (or this key) already has as many runs going as it may; retry when one finishes", rn.Tenant),
			retryAfter: retryAfter}
	case errors.Is(err, errQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: typeRateLimit, code: "queue_full",
			message: fmt.Sprintf("tenant %q already has %d runs waiting for room (api.max_queued_runs); retry when some have started",
				rn.Tenant, s.cfg.maxQueuedRuns()),
			retryAfter: queueFullRetryAfter}
	}
	return errors.Join(errUnavailable, err)
}

func (s *Service) unadmit(id string) {
	if !s.adm.withdraw(id) {
		s.adm.release(id)
	}
}

// bind makes the run its key's tenant's; a body naming another is refused.
func (s *Service) bind(p principal, rn *run) error {
	task := &rn.Task
	if !p.keyed() {
		rn.Tenant = task.Tenant
		if rn.Tenant == "" {
			rn.Tenant = s.cfg.DefaultTenant
		}
		if first, _, _ := strings.Cut(strings.TrimPrefix(task.Workspace, "./"), "/"); first == bus.TenantsFolder {
			return invalid("invalid_task", `field "workspace": the %s folder holds tenants' workspaces`, bus.TenantsFolder)
		}
		return nil
	}
	if task.Tenant != "" && task.Tenant != p.key.Tenant {
		return forbidden("tenant_mismatch", "this key belongs to tenant %q; it cannot start work for tenant %q", p.key.Tenant, task.Tenant)
	}
	if task.Pool != "" && s.cfg.TenantPool != nil {
		if _, err := s.cfg.TenantPool(p.key.Tenant, task.Pool, bus.DefaultPool); err != nil {
			return forbidden("pool_forbidden", "%v", err)
		}
	}
	task.Tenant, rn.Tenant, rn.Bound, rn.KeyID = p.key.Tenant, p.key.Tenant, true, p.key.ID
	task.APIKeyID = p.key.ID
	return nil
}

func (s *Service) publishTask(ctx context.Context, rn *run) error {
	// on the api's own subjects: only their tasks may name a key or a
	// schedule to charge (their budgets)
	subject := bus.TasksSubject
	switch {
	case rn.Bound:
		subject = bus.TenantAPITasks(rn.Tenant)
	case rn.Task.ScheduleID != "":
		subject = bus.APITasksSubject
	}
	return bus.PublishJSON(ctx, s.deps.JS, subject, "task:"+rn.ID, rn.Task)
}

// await publishes a queued run's task once admission lets it start; it
// ends at once when the run is withdrawn (cancelled).
func (s *Service) await(rn *run, ready <-chan bool) {
	defer s.wg.Done()
	select {
	case admitted := <-ready:
		if !admitted {
			return
		}
	case <-s.bg.Done():
		s.unadmit(rn.ID)
		return // shutting down: the run stays queued; the next Start picks it up
	}
	ctx, done := context.WithTimeout(s.bg, 30*time.Second)
	defer done()
	if err := s.publishTask(ctx, rn); err != nil {
		s.log.Error().Err(err).Str("task_id", rn.ID).Str("session_id", rn.SessionID).Msg("publish of an admitted run failed")
		s.adm.release(rn.ID)
		return
	}
	rn.Status = StatusRunning
	if err := s.runs.put(ctx, rn); err != nil {
		s.log.Warn().Err(err).Str("task_id", rn.ID).Msg("run state not recorded")
	}
}

// queuedEvent tells a run's stream where the run stands in its queue.
type queuedEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	TaskID    string `json:"task_id"`
	TS        string `json:"ts"`
	Position  int    `json:"position"`
}

func (s *Service) announce(ctx context.Context, rn *run, pos int) {
	ev := queuedEvent{Type: "queued", SessionID: rn.SessionID, TaskID: rn.ID, TS: time.Now().UTC().Format(time.RFC3339Nano), Position: pos}
	data, _ := json.Marshal(ev)
	if _, err := s.deps.JS.Publish(ctx, bus.SessionEvents(rn.SessionID), data); err != nil {
		s.log.Warn().Err(err).Str("task_id", rn.ID).Msg("queued event not published")
	}
	if rn.Bound {
		_, _ = s.deps.JS.Publish(ctx, bus.TenantSessionEvents(rn.Tenant, rn.SessionID), data)
	}
}

// announcePositions publishes the new positions of runs still waiting.
func (s *Service) announcePositions(positions map[string]int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for id, pos := range positions {
		if rn, err := s.runs.get(ctx, principal{}, id); err == nil {
			s.announce(ctx, rn, pos)
		}
	}
}

// requeue puts back in the queue the runs a previous process left queued,
// oldest first.
func (s *Service) requeue(ctx context.Context) {
	lister, err := s.runs.kv.ListKeysFiltered(ctx, runKey("*"))
	if err != nil {
		return
	}
	var queued []*run
	for key := range lister.Keys() {
		rn, err := s.runs.get(ctx, principal{}, strings.TrimPrefix(key, "run."))
		// a run cancelled while queued has its result, whatever its status
		if err == nil && rn.Status == StatusQueued && rn.Result == nil {
			queued = append(queued, rn)
		}
	}
	slices.SortFunc(queued, func(a, b *run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for _, rn := range queued {
		limit := 0
		if rn.KeyID != "" {
			if k, err := getKey(ctx, s.keys, rn.KeyID); err == nil {
				limit = k.MaxConcurrent
			}
		}
		pos, ready, err := s.adm.admit(ticket{runID: rn.ID, keyID: rn.KeyID, keyLimit: limit, tenant: rn.Tenant,
			order: rn.CreatedAt.UnixNano(), resumed: true})
		if err != nil { // reject mode (there is no queue to go back to), or the bus failing
			s.log.Warn().Err(err).Str("task_id", rn.ID).Msg("queued run not queued again")
			continue
		}
		if pos == 0 {
			admitted := make(chan bool, 1)
			admitted <- true
			ready = admitted
		}
		s.wg.Add(1)
		go s.await(rn, ready)
	}
}

func (s *Service) getRun(w http.ResponseWriter, r *http.Request, p principal) error {
	rn, err := s.runs.get(r.Context(), p, r.PathValue("id"))
	if err != nil {
		return err
	}
	res, err := s.runs.result(r.Context(), rn)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runView{RunID: rn.ID, SessionID: rn.SessionID, Tenant: rn.Tenant,
		Status: statusOf(rn, res), CreatedAt: rn.CreatedAt, Result: res})
	return nil
}

// cancelRun interrupts the run's turn; a queued run is withdrawn and ends
// at once as interrupted.
func (s *Service) cancelRun(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	rn, err := s.runs.get(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	res, err := s.runs.result(ctx, rn)
	if err != nil {
		return err
	}
	if res != nil {
		return conflict("run_finished", "run %s has already finished (%s)", rn.ID, statusOf(rn, res))
	}
	if s.adm.withdraw(rn.ID) {
		res = &proto.Result{SessionID: rn.SessionID, TaskID: rn.ID, ExitReason: proto.ExitInterrupted,
			Error: "cancelled before it started"}
		rn.Status, rn.Result = StatusCancelled, res // no longer queued: a restart does not start it
		if err := s.runs.put(ctx, rn); err != nil {
			return errors.Join(errUnavailable, err)
		}
		s.publishResultEvent(ctx, rn, res)
		writeJSON(w, http.StatusOK, runView{RunID: rn.ID, SessionID: rn.SessionID, Tenant: rn.Tenant,
			Status: StatusCancelled, CreatedAt: rn.CreatedAt, Result: res})
		return nil
	}
	subject := bus.SessionInterrupt(rn.SessionID)
	if rn.Bound {
		subject = bus.TenantSessionInterrupt(rn.Tenant, rn.SessionID)
	}
	if err := bus.PublishJSON(ctx, s.deps.JS, subject, "", proto.Interrupt{Reason: "cancelled through the API", TaskID: rn.ID}); err != nil {
		return errors.Join(errUnavailable, err)
	}
	writeJSON(w, http.StatusAccepted, runView{RunID: rn.ID, SessionID: rn.SessionID, Tenant: rn.Tenant,
		Status: rn.Status, CreatedAt: rn.CreatedAt})
	return nil
}

// publishResultEvent ends the event stream of a run that never started.
func (s *Service) publishResultEvent(ctx context.Context, rn *run, res *proto.Result) {
	data, _ := json.Marshal(proto.Event{Type: proto.EventResult, SessionID: rn.SessionID, TaskID: rn.ID,
		TS: time.Now().UTC().Format(time.RFC3339Nano), Result: res})
	if _, err := s.deps.JS.Publish(ctx, bus.SessionEvents(rn.SessionID), data); err != nil {
		s.log.Warn().Err(err).Str("task_id", rn.ID).Msg("result event not published")
	}
}

// inputRun answers the run's approval or clarify prompt.
func (s *Service) inputRun(w http.ResponseWriter, r *http.Request, p principal) error {
	ctx := r.Context()
	rn, err := s.runs.get(ctx, p, r.PathValue("id"))
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var in proto.Input
	if err := decodeStrict(body, &in); err != nil {
		return err
	}
	switch {
	case in.RequestID == "" && in.CallID == "":
		return invalid("invalid_input", `give "request_id" (or "call_id") of the approval_required or clarify event you answer`)
	case in.Approved == nil && in.Answer == "":
		return invalid("invalid_input", `give "approved" (true or false) for an approval, or "answer" for a clarify question`)
	}
	subject := bus.SessionInput(rn.SessionID)
	if rn.Bound {
		subject = bus.TenantSessionInput(rn.Tenant, rn.SessionID)
	}
	if err := bus.PublishJSON(ctx, s.deps.JS, subject, "", in); err != nil {
		return errors.Join(errUnavailable, err)
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": rn.ID, "status": "sent"})
	return nil
}

// readBody reads a request body up to maxBody, within the body timeout: a
// client that stops sending its body is cut off rather than holding the
// connection. The deadline is lifted once the body is in, so a response
// streamed on the connection (SSE) is not cut; after a failed read it
// stays, and the connection is closed rather than drained.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	timeout := s.cfg.bodyTimeout()
	_ = rc.SetReadDeadline(time.Now().Add(timeout)) // a writer that cannot (a test recorder) reads unbounded
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		w.Header().Set("Connection", "close")
	} else {
		_ = rc.SetReadDeadline(time.Time{})
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &apiError{status: http.StatusRequestTimeout, typ: typeInvalidRequest, code: "request_timeout",
			message: fmt.Sprintf("the request body did not arrive within %s", timeout)}
	case err != nil:
		return nil, invalid("unreadable_body", "could not read the request body: %v", err)
	case len(data) > maxBody:
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalidRequest, code: "request_too_large",
			message: fmt.Sprintf("the request body is over %d bytes", maxBody)}
	}
	return data, nil
}

// decodeStrict parses one JSON object into v, refusing unknown fields.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("invalid_json", "the request body is not valid: %v", err)
	}
	if dec.More() {
		return invalid("invalid_json", "the request body has data after its JSON object")
	}
	return nil
}
