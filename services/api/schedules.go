package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Schedule is a prompt run on a timetable: JetStream's own message
// schedules fire it (no timer process of Herald's), and each fire becomes
// one task whose id is the schedule's id and the fire's time, so a fire is
// never run twice.
type Schedule struct {
	ID         string    `json:"id"`
	Cron       string    `json:"cron,omitempty"`
	TZ         string    `json:"tz,omitempty"`
	Every      string    `json:"every,omitempty"`
	At         string    `json:"at,omitempty"`
	Prompt     string    `json:"prompt"`
	Tenant     string    `json:"tenant,omitempty"`
	Bound      bool      `json:"bound,omitempty"`
	KeyID      string    `json:"key_id,omitempty"`
	Model      string    `json:"model,omitempty"`
	MaxCostUSD float64   `json:"max_cost_usd,omitempty"`
	Paused     bool      `json:"paused"`
	CreatedAt  time.Time `json:"created_at"`
	NextFire   time.Time `json:"next_fire,omitzero"`
	LastFire   time.Time `json:"last_fire,omitzero"`
	LastRunID  string    `json:"last_run_id,omitempty"`
	LastSessID string    `json:"last_session_id,omitempty"`
	// LastOutcome is the last fire's run status (filled in when listed).
	LastOutcome string `json:"last_outcome,omitempty"`
	Fires       int    `json:"fires"`
	// Missed is the missed-fire policy (MissedRunOnce or MissedSkip): what
	// becomes of a fire JetStream could only make late, NATS having been
	// down at its time.
	Missed      string    `json:"missed,omitempty"`
	MissedFires int       `json:"missed_fires"`
	LastMissed  time.Time `json:"last_missed,omitzero"`
	// RecentFires are the last fires handled, newest last: a fire
	// delivered again finds here what was decided for it.
	RecentFires []Fire `json:"recent_fires,omitempty"`
	// Disabled says why Herald paused the schedule itself (its key was
	// revoked); resuming clears it.
	Disabled string `json:"disabled,omitempty"`
}

// Fire is one fire of a schedule as handled: run (RunID) or missed.
type Fire struct {
	At     time.Time `json:"at"`
	Due    time.Time `json:"due"`
	RunID  string    `json:"run_id,omitempty"`
	Missed bool      `json:"missed,omitempty"`
	Late   bool      `json:"late,omitempty"`
}

// The missed-fire policies. A fire is late when JetStream made it more than
// the schedule's grace (half its interval, at most a minute) after it was
// due: NATS was down at its time (JetStream fires a schedule's missed
// times once, when it is back). run-once runs that one late fire;
// skip records it as missed and runs nothing.
const (
	MissedRunOnce = "run-once"
	MissedSkip    = "skip"
)

// recentFires is how many handled fires a schedule remembers.
const recentFires = 20

// ErrInvalidSchedule says a schedule could not be created as asked.
var ErrInvalidSchedule = errors.New("invalid schedule")

// ErrNoSuchSchedule says no schedule has the given id.
var ErrNoSuchSchedule = errors.New("no such schedule")

func scheduleKey(id string) string { return "schedule." + id }

// pattern is the schedule as a Nats-Schedule header, and when it fires next.
func (sc *Schedule) pattern(now time.Time) (string, time.Time, error) {
	set := 0
	for _, v := range []string{sc.Cron, sc.Every, sc.At} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return "", time.Time{}, fmt.Errorf("%w: give exactly one of cron, every, at", ErrInvalidSchedule)
	}
	loc := time.UTC
	if sc.TZ != "" {
		l, err := time.LoadLocation(sc.TZ)
		if err != nil || sc.Cron == "" {
			return "", time.Time{}, fmt.Errorf("%w: tz %q: a known time zone, with cron only", ErrInvalidSchedule, sc.TZ)
		}
		loc = l
	}
	switch {
	case sc.Every != "":
		d, err := time.ParseDuration(sc.Every)
		if err != nil || d < time.Second {
			return "", time.Time{}, fmt.Errorf("%w: every %q: a duration of at least 1s, e.g. 15m", ErrInvalidSchedule, sc.Every)
		}
		return "@every " + d.String(), now.Add(d), nil
	case sc.At != "":
		t, err := time.Parse(time.RFC3339, sc.At)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("%w: at %q: a time like 2026-12-24T09:00:00Z", ErrInvalidSchedule, sc.At)
		}
		if !t.After(now) {
			return "", time.Time{}, fmt.Errorf("%w: at %s is in the past", ErrInvalidSchedule, sc.At)
		}
		return "@at " + t.UTC().Format(time.RFC3339), t.UTC(), nil
	}
	c, err := parseCron(sc.Cron)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %v", ErrInvalidSchedule, err)
	}
	next, ok := c.next(now.In(loc))
	if !ok {
		return "", time.Time{}, fmt.Errorf("%w: cron %q never fires", ErrInvalidSchedule, sc.Cron)
	}
	return "0 " + sc.Cron, next.UTC(), nil // JetStream's cron has a seconds field first
}

// grace is how late a fire may be made and still count as on time: half
// the schedule's interval, at least a second and at most a minute.
func (sc *Schedule) grace() time.Duration {
	interval := time.Minute
	if d, err := time.ParseDuration(sc.Every); err == nil && sc.Every != "" {
		interval = d
	}
	if c, err := parseCron(sc.Cron); err == nil && sc.Cron != "" {
		if a, ok := c.next(time.Now().UTC()); ok {
			if b, ok := c.next(a); ok {
				interval = b.Sub(a)
			}
		}
	}
	return min(time.Minute, max(time.Second, interval/2))
}

// AddSchedule validates and stores sc and hands it to JetStream to fire.
func AddSchedule(ctx context.Context, js jetstream.JetStream, sc Schedule) (Schedule, error) {
	if strings.TrimSpace(sc.Prompt) == "" || len(sc.Prompt) > proto.MaxPromptBytes {
		return Schedule{}, fmt.Errorf("%w: the prompt must be given, at most %d bytes", ErrInvalidSchedule, proto.MaxPromptBytes)
	}
	if sc.Tenant != "" && !config.ValidTenant(sc.Tenant) {
		return Schedule{}, fmt.Errorf("%w: tenant %q must be 1 to 128 letters, digits, '-' or '_'", ErrInvalidSchedule, sc.Tenant)
	}
	if sc.MaxCostUSD < 0 {
		return Schedule{}, fmt.Errorf("%w: max cost must not be negative", ErrInvalidSchedule)
	}
	switch sc.Missed {
	case "":
		sc.Missed = MissedRunOnce
	case MissedRunOnce, MissedSkip:
	default:
		return Schedule{}, fmt.Errorf("%w: missed %q: %s or %s", ErrInvalidSchedule, sc.Missed, MissedRunOnce, MissedSkip)
	}
	now := time.Now().UTC()
	if _, _, err := sc.pattern(now); err != nil {
		return Schedule{}, err
	}
	sc.ID, sc.CreatedAt, sc.Paused = newID("sch_"), now, false
	kv, err := js.KeyValue(ctx, bus.BucketAPIRuns)
	if err != nil {
		return Schedule{}, err
	}
	if err := putSchedule(ctx, kv, &sc); err != nil {
		return Schedule{}, err
	}
	if err := arm(ctx, js, &sc); err != nil {
		_ = kv.Delete(ctx, scheduleKey(sc.ID))
		return Schedule{}, err
	}
	return sc, putSchedule(ctx, kv, &sc)
}

// arm publishes the schedule message JetStream fires.
func arm(ctx context.Context, js jetstream.JetStream, sc *Schedule) error {
	pattern, next, err := sc.pattern(time.Now().UTC())
	if err != nil {
		return err
	}
	sc.NextFire = next
	m := nats.NewMsg(bus.Schedule(sc.ID))
	m.Header.Set("Nats-Schedule", pattern)
	m.Header.Set("Nats-Schedule-Target", bus.ScheduleFire(sc.ID))
	m.Header.Set("Nats-Schedule-TTL", bus.ScheduleFireTTL.String())
	if sc.TZ != "" {
		m.Header.Set("Nats-Schedule-Time-Zone", sc.TZ)
	}
	m.Data, _ = json.Marshal(map[string]string{"schedule_id": sc.ID})
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("arm schedule %s: %w", sc.ID, err)
	}
	return nil
}

// disarm removes the schedule message: JetStream fires it no more.
func disarm(ctx context.Context, js jetstream.JetStream, id string) error {
	s, err := js.Stream(ctx, bus.StreamSchedules)
	if err != nil {
		return err
	}
	return s.Purge(ctx, jetstream.WithPurgeSubject(bus.Schedule(id)))
}

func putSchedule(ctx context.Context, kv jetstream.KeyValue, sc *Schedule) error {
	data, _ := json.Marshal(sc)
	_, err := kv.Put(ctx, scheduleKey(sc.ID), data)
	return err
}

func getSchedule(ctx context.Context, kv jetstream.KeyValue, id string) (*Schedule, error) {
	sc, _, err := readSchedule(ctx, kv, id)
	return sc, err
}

// readSchedule is a schedule and the revision it was read at.
func readSchedule(ctx context.Context, kv jetstream.KeyValue, id string) (*Schedule, uint64, error) {
	if !proto.IsToken(id) {
		return nil, 0, fmt.Errorf("%w %q", ErrNoSuchSchedule, id)
	}
	e, err := kv.Get(ctx, scheduleKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w %q", ErrNoSuchSchedule, id)
	}
	if err != nil {
		return nil, 0, err
	}
	var sc Schedule
	if err := json.Unmarshal(e.Value(), &sc); err != nil {
		return nil, 0, fmt.Errorf("schedule %s is unreadable: %w", id, err)
	}
	return &sc, e.Revision(), nil
}

// ListSchedules returns every schedule, oldest first, with the outcome of
// its last fire.
func ListSchedules(ctx context.Context, js jetstream.JetStream) ([]Schedule, error) {
	kv, err := js.KeyValue(ctx, bus.BucketAPIRuns)
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, scheduleKey("*"))
	if err != nil {
		return nil, err
	}
	st := &store{kv: kv, js: js}
	var out []Schedule
	for key := range lister.Keys() {
		sc, err := getSchedule(ctx, kv, strings.TrimPrefix(key, "schedule."))
		if err != nil {
			continue
		}
		if sc.LastRunID != "" {
			if rn, err := st.get(ctx, principal{}, sc.LastRunID); err == nil {
				res, _ := st.result(ctx, rn)
				sc.LastOutcome = statusOf(rn, res)
			}
		}
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// PauseSchedule stops a schedule firing until ResumeSchedule.
func PauseSchedule(ctx context.Context, js jetstream.JetStream, id string) error {
	return setPaused(ctx, js, id, true)
}

// ResumeSchedule arms a paused schedule again.
func ResumeSchedule(ctx context.Context, js jetstream.JetStream, id string) error {
	return setPaused(ctx, js, id, false)
}

func setPaused(ctx context.Context, js jetstream.JetStream, id string, paused bool) error {
	kv, err := js.KeyValue(ctx, bus.BucketAPIRuns)
	if err != nil {
		return err
	}
	sc, err := getSchedule(ctx, kv, id)
	if err != nil {
		return err
	}
	if paused {
		err = disarm(ctx, js, id)
	} else {
		err = arm(ctx, js, sc)
	}
	if err != nil {
		return err
	}
	_, err = updateSchedule(ctx, kv, id, func(cur *Schedule) error {
		cur.Paused, cur.NextFire, cur.Disabled = paused, sc.NextFire, ""
		if paused {
			cur.NextFire = time.Time{}
		}
		return nil
	})
	return err
}

// errUnchanged ends an updateSchedule that has nothing to write.
var errUnchanged = errors.New("unchanged")

// updateSchedule applies change to the stored schedule by revision, again
// on a fresh read when another write (a fire, a pause) came between, so
// none is lost. It returns the schedule as stored.
func updateSchedule(ctx context.Context, kv jetstream.KeyValue, id string, change func(*Schedule) error) (*Schedule, error) {
	for {
		sc, rev, err := readSchedule(ctx, kv, id)
		if err != nil {
			return nil, err
		}
		if err := change(sc); errors.Is(err, errUnchanged) {
			return sc, nil
		} else if err != nil {
			return nil, err
		}
		data, _ := json.Marshal(sc)
		_, err = kv.Update(ctx, scheduleKey(id), data, rev)
		if err == nil {
			return sc, nil
		}
		var apiErr *jetstream.APIError
		conflict := errors.Is(err, jetstream.ErrKeyExists) ||
			(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
		if !conflict {
			return nil, err
		}
	}
}

// RemoveSchedule deletes a schedule for good.
func RemoveSchedule(ctx context.Context, js jetstream.JetStream, id string) error {
	kv, err := js.KeyValue(ctx, bus.BucketAPIRuns)
	if err != nil {
		return err
	}
	if _, err := getSchedule(ctx, kv, id); err != nil {
		return err
	}
	if err := disarm(ctx, js, id); err != nil {
		return err
	}
	return kv.Delete(ctx, scheduleKey(id))
}

// scheduleConsumer is the durable consumer, shared by every api process,
// that turns fires into tasks.
const scheduleConsumer = "api-schedule-fires"

// fireAckWait is how soon a fire whose api process died is delivered again.
const fireAckWait = 10 * time.Second

// followFires consumes fired schedule messages.
func (s *Service) followFires(ctx context.Context) (jetstream.ConsumeContext, error) {
	cons, err := s.deps.JS.CreateOrUpdateConsumer(ctx, bus.StreamSchedules, jetstream.ConsumerConfig{
		Durable: scheduleConsumer, FilterSubject: bus.ScheduleFireFilter, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: fireAckWait, MaxDeliver: -1})
	if err != nil {
		return nil, fmt.Errorf("schedule consumer: %w", err)
	}
	return cons.Consume(func(m jetstream.Msg) {
		if err := s.fire(m); err != nil {
			s.log.Warn().Err(err).Str("subject", m.Subject()).Msg("schedule fire not started; retrying")
			_ = m.NakWithDelay(2 * time.Second)
			return
		}
		_ = m.Ack()
	})
}

// fire handles one fire, once, in two steps each safe to repeat when the
// fire is delivered again (its api process killed half way): the schedule
// records the fire and what was decided for it (run, or missed by its
// policy), then the fire's run starts; its id is the schedule's id and the
// fire's time, so a second start finds the first.
func (s *Service) fire(m jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(s.bg, fireAckWait-2*time.Second)
	defer cancel()
	id := strings.TrimSuffix(strings.TrimPrefix(m.Subject(), "herald.schedule."), ".fire")
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	at := meta.Timestamp.UTC().Truncate(time.Second)
	var next time.Time
	if h := m.Headers().Get("Nats-Schedule-Next"); h != "" {
		if t, err := time.Parse(time.RFC3339Nano, h); err == nil {
			next = t.UTC()
		}
	}
	p, err := s.scheduleOwner(ctx, id)
	if errors.Is(err, ErrNoSuchSchedule) || errors.Is(err, errKeyRevoked) {
		return nil // removed since, or stopped for good
	}
	if err != nil {
		return err
	}
	sc, f, err := s.recordFire(ctx, id, at, next)
	if errors.Is(err, ErrNoSuchSchedule) {
		return nil // removed since
	}
	if err != nil {
		return err
	}
	crashPoint("schedule-fire-recorded")
	if f.Missed {
		s.log.Info().Str("schedule_id", sc.ID).Time("due", f.Due).Time("fired", f.At).Msg("schedule fire missed (NATS was down at its time); skipped by its policy")
		return nil
	}
	task := proto.Task{Prompt: sc.Prompt, SessionID: fmt.Sprintf("sess_%s_%d", sc.ID, at.Unix()), Model: sc.Model,
		MaxCostUSD: sc.MaxCostUSD, Tenant: sc.Tenant, Metadata: map[string]string{"schedule_id": sc.ID}, ScheduleID: sc.ID}
	rn := &run{ID: f.RunID, Kind: kindSchedule, Task: task}
	if _, err := s.startRun(ctx, p, rn); err != nil {
		var e *apiError
		if errors.As(err, &e) && e.code == "run_exists" {
			return s.resumeFire(ctx, f.RunID)
		}
		return err
	}
	crashPoint("schedule-fire-started")
	return nil
}

// errKeyRevoked says a schedule's key no longer exists.
var errKeyRevoked = errors.New("the schedule's key was revoked")

// scheduleOwner is who a fire of schedule id runs as: its key as it is now
// (its tenant and its max_concurrent), or no key for a schedule made
// without one. A schedule whose key was revoked is disabled, and
// errKeyRevoked returned: it does not outlive its key.
func (s *Service) scheduleOwner(ctx context.Context, id string) (principal, error) {
	sc, err := getSchedule(ctx, s.runs.kv, id)
	if err != nil || sc.KeyID == "" {
		return principal{}, err
	}
	k, err := getKey(ctx, s.keys, sc.KeyID)
	if errors.Is(err, ErrNoSuchKey) {
		s.log.Warn().Str("schedule_id", id).Str("key_id", sc.KeyID).Msg("schedule's key revoked: fire dropped and schedule disabled")
		if err := s.disableSchedule(ctx, id, fmt.Sprintf("its key %s was revoked", sc.KeyID)); err != nil {
			return principal{}, err
		}
		return principal{}, errKeyRevoked
	}
	if err != nil {
		return principal{}, err
	}
	return principal{key: k}, nil
}

// disableSchedule stops a schedule firing, saying why; resuming it arms it
// again.
func (s *Service) disableSchedule(ctx context.Context, id, why string) error {
	if err := disarm(ctx, s.deps.JS, id); err != nil {
		return err
	}
	_, err := updateSchedule(ctx, s.runs.kv, id, func(sc *Schedule) error {
		sc.Paused, sc.NextFire, sc.Disabled = true, time.Time{}, why
		return nil
	})
	return err
}

// resumeFire makes sure the task of a fire's run, recorded by a process
// that died before or after publishing it, went out: it is published again
// under the same message id, and the loop starts a task id only once.
func (s *Service) resumeFire(ctx context.Context, runID string) error {
	rn, err := s.runs.get(ctx, principal{}, runID)
	if err != nil {
		return err
	}
	if rn.Status != StatusRunning {
		return nil // queued: the queue's own restart takes it
	}
	if res, err := s.runs.result(ctx, rn); err != nil || res != nil {
		return err
	}
	return s.publishTask(ctx, rn)
}

// recordFire counts the fire on its schedule, deciding whether it runs, or
// returns what was decided for it already.
func (s *Service) recordFire(ctx context.Context, id string, at, next time.Time) (*Schedule, Fire, error) {
	var f Fire
	sc, err := updateSchedule(ctx, s.runs.kv, id, func(sc *Schedule) error {
		for _, done := range sc.RecentFires {
			if done.At.Equal(at) {
				f = done
				return errUnchanged
			}
		}
		f = Fire{At: at, Due: at, RunID: fmt.Sprintf("%s_%d", sc.ID, at.Unix())}
		if !sc.NextFire.IsZero() && sc.NextFire.Before(at) {
			f.Due = sc.NextFire
		}
		f.Late = at.Sub(f.Due) > sc.grace()
		if f.Late && sc.Missed == MissedSkip {
			f.Missed, f.RunID = true, ""
			sc.MissedFires++
			sc.LastMissed = f.Due
		} else {
			sc.Fires++
			sc.LastFire, sc.LastRunID, sc.LastSessID = at, f.RunID, fmt.Sprintf("sess_%s_%d", sc.ID, at.Unix())
		}
		if !next.IsZero() {
			sc.NextFire = next
		} else if sc.At != "" {
			sc.NextFire = time.Time{} // fired once: done
		}
		if sc.Paused {
			sc.NextFire = time.Time{} // a fire made just before the pause: none follows
		}
		sc.RecentFires = append(sc.RecentFires, f)
		if len(sc.RecentFires) > recentFires {
			sc.RecentFires = sc.RecentFires[len(sc.RecentFires)-recentFires:]
		}
		return nil
	})
	if err != nil {
		return nil, Fire{}, err
	}
	return sc, f, nil
}
