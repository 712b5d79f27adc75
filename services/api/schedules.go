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
}

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
	if !proto.IsToken(id) {
		return nil, fmt.Errorf("%w %q", ErrNoSuchSchedule, id)
	}
	e, err := kv.Get(ctx, scheduleKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w %q", ErrNoSuchSchedule, id)
	}
	if err != nil {
		return nil, err
	}
	var sc Schedule
	if err := json.Unmarshal(e.Value(), &sc); err != nil {
		return nil, fmt.Errorf("schedule %s is unreadable: %w", id, err)
	}
	return &sc, nil
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
	sc.Paused = paused
	if paused {
		err = disarm(ctx, js, id)
	} else {
		err = arm(ctx, js, sc)
	}
	if err != nil {
		return err
	}
	if paused {
		sc.NextFire = time.Time{}
	}
	return putSchedule(ctx, kv, sc)
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

// followFires consumes fired schedule messages.
func (s *Service) followFires(ctx context.Context) (jetstream.ConsumeContext, error) {
	cons, err := s.deps.JS.CreateOrUpdateConsumer(ctx, bus.StreamSchedules, jetstream.ConsumerConfig{
		Durable: scheduleConsumer, FilterSubject: bus.ScheduleFireFilter, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: -1})
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

// fire starts the run of one fire, once: its id is the schedule's id and
// the fire's time, so a redelivered fire finds its run and stops there.
func (s *Service) fire(m jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(s.bg, 30*time.Second)
	defer cancel()
	id := strings.TrimSuffix(strings.TrimPrefix(m.Subject(), "herald.schedule."), ".fire")
	sc, err := getSchedule(ctx, s.runs.kv, id)
	if errors.Is(err, ErrNoSuchSchedule) {
		return nil // removed since
	}
	if err != nil {
		return err
	}
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	at := meta.Timestamp.UTC().Truncate(time.Second)
	runID := fmt.Sprintf("%s_%d", sc.ID, at.Unix())
	if _, err := s.runs.get(ctx, principal{}, runID); err == nil {
		return nil // this fire's run exists
	}
	task := proto.Task{Prompt: sc.Prompt, SessionID: fmt.Sprintf("sess_%s_%d", sc.ID, at.Unix()), Model: sc.Model,
		MaxCostUSD: sc.MaxCostUSD, Tenant: sc.Tenant, Metadata: map[string]string{"schedule_id": sc.ID}, ScheduleID: sc.ID}
	p := principal{}
	if sc.KeyID != "" {
		p.key = Key{ID: sc.KeyID, Tenant: sc.Tenant}
	}
	rn := &run{ID: runID, Kind: kindSchedule, Task: task}
	if _, err := s.startRun(ctx, p, rn); err != nil {
		var e *apiError
		if errors.As(err, &e) && e.code == "run_exists" {
			return nil
		}
		return err
	}
	sc.LastFire, sc.LastRunID, sc.LastSessID = at, rn.ID, rn.SessionID
	sc.Fires++
	if next := m.Headers().Get("Nats-Schedule-Next"); next != "" {
		if t, err := time.Parse(time.RFC3339Nano, next); err == nil {
			sc.NextFire = t.UTC()
		}
	}
	return putSchedule(ctx, s.runs.kv, sc)
}
