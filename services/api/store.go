package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
)

// Run states as GET /v1/runs/{id} reports them.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Kinds of run: which route started it.
const (
	kindRun      = "run"
	kindResponse = "response"
	kindChat     = "chat"
	kindSchedule = "schedule"
)

// run is what the api service remembers of one turn it started.
type run struct {
	ID        string     `json:"run_id"`
	SessionID string     `json:"session_id"`
	Kind      string     `json:"kind"`
	Tenant    string     `json:"tenant"`
	Bound     bool       `json:"bound,omitempty"` // published on herald.tasks.<tenant>
	KeyID     string     `json:"key_id,omitempty"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	Task      proto.Task `json:"task"`
	// Result is set only for a run cancelled before it started; any other
	// run's result is the durable one on its session's result subject.
	Result *proto.Result `json:"result,omitempty"`
	// Responses API: what the response object echoes.
	Model              string            `json:"model,omitempty"`
	Instructions       string            `json:"instructions,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	Reasoning          *reasoningParam   `json:"reasoning,omitempty"`
}

// sessionOwner records which tenant a session the api started belongs to.
type sessionOwner struct {
	Tenant string `json:"tenant"`
	Keyed  bool   `json:"keyed"`
}

func runKey(id string) string      { return "run." + id }
func sessionKey(sid string) string { return "session." + sid }

type store struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
}

func (st *store) create(ctx context.Context, r *run) error {
	data, _ := json.Marshal(r)
	_, err := st.kv.Create(ctx, runKey(r.ID), data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return conflict("run_exists", "a run with id %q already exists", r.ID)
	}
	return err
}

func (st *store) put(ctx context.Context, r *run) error {
	data, _ := json.Marshal(r)
	_, err := st.kv.Put(ctx, runKey(r.ID), data)
	return err
}

func (st *store) remove(ctx context.Context, id string) {
	_ = st.kv.Delete(ctx, runKey(id))
}

// get returns the run, or a 404 when it does not exist or p may not see it.
func (st *store) get(ctx context.Context, p principal, id string) (*run, error) {
	if !proto.IsToken(id) {
		return nil, notFound("run", id)
	}
	e, err := st.kv.Get(ctx, runKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, notFound("run", id)
	}
	if err != nil {
		return nil, errors.Join(errUnavailable, err)
	}
	var r run
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("run %s is unreadable: %w", id, err)
	}
	if p.keyed() && (!r.Bound || r.Tenant != p.key.Tenant) {
		return nil, notFound("run", id) // another tenant's run does not exist for this key
	}
	return &r, nil
}

// claimSession makes sid a session of tenant: a new session is recorded as
// the tenant's; an existing one must already be. A keyed client can neither
// reach another tenant's session nor one started outside the api. It
// reports whether it recorded the session (unclaimSession undoes that).
func (st *store) claimSession(ctx context.Context, p principal, sid, tenant string, fresh bool) (bool, error) {
	owner := sessionOwner{Tenant: tenant, Keyed: p.keyed()}
	data, _ := json.Marshal(owner)
	if fresh { // an id the api just made up: nobody can have it yet
		if _, err := st.kv.Create(ctx, sessionKey(sid), data); err != nil {
			return false, errors.Join(errUnavailable, err)
		}
		return true, nil
	}
	e, err := st.kv.Get(ctx, sessionKey(sid))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		if p.keyed() {
			started, err := st.startedOnTheBus(ctx, sid)
			if err != nil {
				return false, errors.Join(errUnavailable, err)
			}
			if started {
				return false, notFound("session", sid)
			}
		}
		_, err := st.kv.Create(ctx, sessionKey(sid), data)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return st.claimSession(ctx, p, sid, tenant, false) // read back what won a race
		}
		if err != nil {
			return false, errors.Join(errUnavailable, err)
		}
		return true, nil
	case err != nil:
		return false, errors.Join(errUnavailable, err)
	}
	var have sessionOwner
	if json.Unmarshal(e.Value(), &have) != nil || have.Tenant != tenant || have.Keyed != p.keyed() {
		return false, notFound("session", sid)
	}
	return false, nil
}

// unclaimSession forgets a session recorded for a run that was refused.
func (st *store) unclaimSession(ctx context.Context, sid string) {
	_ = st.kv.Delete(ctx, sessionKey(sid))
}

// startedOnTheBus says whether sid is a session someone started on the bus,
// not through this api: it has a result, or events (EVENTS keeps a day of
// them) of a first turn still going. A key must not take such a session
// over: naming its task id as well, it would read that turn's events and
// result as its own run's.
func (st *store) startedOnTheBus(ctx context.Context, sid string) (bool, error) {
	if _, err := bus.LastOnSubject(ctx, st.js, bus.StreamSessions, bus.SessionResult(sid)); err == nil {
		return true, nil
	}
	cons, err := st.js.CreateConsumer(ctx, bus.StreamEvents, jetstream.ConsumerConfig{FilterSubject: bus.SessionEvents(sid),
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute})
	if err != nil {
		return false, err
	}
	info := cons.CachedInfo()
	_ = st.js.DeleteConsumer(ctx, bus.StreamEvents, info.Name)
	return info.NumPending > 0, nil
}

// result finds the durable result of the run's task, if it has one.
func (st *store) result(ctx context.Context, r *run) (*proto.Result, error) {
	if r.Result != nil {
		return r.Result, nil
	}
	subject := bus.SessionResult(r.SessionID)
	last, err := bus.LastOnSubject(ctx, st.js, bus.StreamSessions, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Join(errUnavailable, err)
	}
	if res, ok := resultOf(last.Data, r.ID); ok {
		return res, nil
	}
	// A later turn of the session finished since: walk its results.
	for seq := uint64(1); seq < last.Sequence; {
		m, err := bus.NextOnSubject(ctx, st.js, bus.StreamSessions, subject, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, errors.Join(errUnavailable, err)
		}
		if res, ok := resultOf(m.Data, r.ID); ok {
			return res, nil
		}
		seq = m.Sequence + 1
	}
	return nil, nil
}

func resultOf(data []byte, taskID string) (*proto.Result, bool) {
	var res proto.Result
	if json.Unmarshal(data, &res) != nil || res.TaskID != taskID {
		return nil, false
	}
	return &res, true
}

// statusOf is the run's state given its result (nil: none yet).
func statusOf(r *run, res *proto.Result) string {
	if res == nil {
		return r.Status
	}
	switch res.ExitReason {
	case proto.ExitTextResponse:
		return StatusCompleted
	case proto.ExitInterrupted:
		return StatusCancelled
	}
	return StatusFailed
}
