package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// A Change is one stream, bucket or object store that Declare created or
// updated, with why.
type Change struct {
	Stream string // the JetStream stream (KV_<bucket>, OBJ_<bucket> for stores)
	Action string // "created", "updated" or "migrated"
	Reason string // for an update: the first setting that differed
}

// ErrNotDeclared says the server lacks a stream (or has an older
// declaration of it) that this connection is not allowed to declare.
var ErrNotDeclared = errors.New(`not declared; run "herald declare" as a user allowed to (see deploy/README.md)`)

// declaration is one thing Declare keeps in shape: the stream behind it,
// how far an existing stream's configuration is from it (the replica count
// aside), and how to apply it with a given replica count.
type declaration struct {
	stream   string
	replicas int
	differs  func(have jetstream.StreamConfig) string
	apply    func(ctx context.Context, js jetstream.JetStream, replicas int) error
}

func declarations(replicas int) []declaration {
	var ds []declaration
	for _, cfg := range Streams(replicas) {
		ds = append(ds, declaration{stream: cfg.Name, replicas: cfg.Replicas,
			differs: func(have jetstream.StreamConfig) string { return streamDiff(cfg, have) },
			apply: func(ctx context.Context, js jetstream.JetStream, replicas int) error {
				c := cfg
				c.Replicas = replicas
				_, err := js.CreateOrUpdateStream(ctx, c)
				return err
			}})
	}
	for _, cfg := range Buckets(replicas) {
		want := jetstream.StreamConfig{MaxMsgsPerSubject: int64(cfg.History), MaxAge: cfg.TTL, Storage: cfg.Storage,
			AllowDirect: true}
		ds = append(ds, declaration{stream: "KV_" + cfg.Bucket, replicas: cfg.Replicas,
			differs: func(have jetstream.StreamConfig) string { return storeDiff(want, have) },
			apply: func(ctx context.Context, js jetstream.JetStream, replicas int) error {
				c := cfg
				c.Replicas = replicas
				_, err := js.CreateOrUpdateKeyValue(ctx, c)
				return err
			}})
	}
	for _, cfg := range ObjectStores(replicas) {
		want := jetstream.StreamConfig{MaxAge: cfg.TTL, Storage: cfg.Storage, AllowDirect: true}
		ds = append(ds, declaration{stream: "OBJ_" + cfg.Bucket, replicas: cfg.Replicas,
			differs: func(have jetstream.StreamConfig) string { return storeDiff(want, have) },
			apply: func(ctx context.Context, js jetstream.JetStream, replicas int) error {
				c := cfg
				c.Replicas = replicas
				_, err := js.CreateOrUpdateObjectStore(ctx, c)
				return err
			}})
	}
	return ds
}

// How far declare goes.
type declareMode int

const (
	checkOnly  declareMode = iota // write nothing
	ensureOnly                    // create what is missing, repair what differs; keep replica counts
	declareAll                    // also set every replica count to the configured one
)

// Declare brings every stream, bucket and object store to this version's
// declaration, replica counts included. It reads what exists first (one
// STREAM.LIST) and writes only what is missing or differs, so a process that
// finds everything in place needs no right to create or update streams: in a
// deployment with one NATS user per service only the admin user that runs
// "herald declare" holds it.
func Declare(ctx context.Context, js jetstream.JetStream, replicas int) ([]Change, error) {
	return declare(ctx, js, replicas, declareAll)
}

// Ensure creates what is missing and repairs what differs from this
// version's declaration, leaving existing streams' replica counts as they
// are: a process configured with the default of one replica must not shrink
// a cluster's streams. New streams get replicas copies.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	_, err := declare(ctx, js, replicas, ensureOnly)
	return err
}

// Check reports, writing nothing, whether every stream, bucket and object
// store is in place as this version declares it (replica counts aside);
// ErrNotDeclared says not.
func Check(ctx context.Context, js jetstream.JetStream, replicas int) error {
	_, err := declare(ctx, js, replicas, checkOnly)
	return err
}

// CheckExists reports whether the named streams exist, whatever their
// configuration: enough for a client that only submits work and reads
// results, which should not refuse a server declared by another version.
func CheckExists(ctx context.Context, js jetstream.JetStream, streams ...string) error {
	have, err := listStreams(ctx, js)
	if err != nil {
		return err
	}
	for _, name := range streams {
		if _, ok := have[name]; !ok {
			return fmt.Errorf("stream %s is missing: %w", name, ErrNotDeclared)
		}
	}
	return nil
}

func listStreams(ctx context.Context, js jetstream.JetStream) (map[string]jetstream.StreamConfig, error) {
	have := map[string]jetstream.StreamConfig{}
	list := js.ListStreams(ctx)
	for info := range list.Info() {
		have[info.Config.Name] = info.Config
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	return have, nil
}

func declare(ctx context.Context, js jetstream.JetStream, replicas int, mode declareMode) ([]Change, error) {
	have, err := listStreams(ctx, js)
	if err != nil {
		return nil, err
	}
	var changes []Change
	if cfg, ok := have[StreamSessions]; ok && mode != checkOnly {
		moved, err := migrateSessionLogs(ctx, js, cfg)
		if err != nil {
			if denied(js, err) {
				return nil, fmt.Errorf("stream %s keeps transcripts under a public subject and this user may not move them (%v): %w",
					StreamSessions, deniedCause(js, err), ErrNotDeclared)
			}
			return nil, err
		}
		if moved > 0 {
			changes = append(changes, Change{Stream: StreamSessions, Action: "migrated",
				Reason: fmt.Sprintf("%d transcript entries moved from %s to %s", moved, LegacySessionLogFilter, SessionLogFilter)})
		}
	}
	for _, d := range declarations(replicas) {
		ch := Change{Stream: d.stream, Action: "created"}
		copies := d.replicas
		if cfg, ok := have[d.stream]; ok {
			ch.Reason = d.differs(cfg)
			if mode == declareAll && ch.Reason == "" && max(cfg.Replicas, 1) != copies {
				ch.Reason = fmt.Sprintf("replicas %d, want %d", cfg.Replicas, copies)
			}
			if ch.Reason == "" {
				continue
			}
			if mode != declareAll {
				copies = max(cfg.Replicas, 1)
			}
			ch.Action = "updated"
		}
		state := "missing"
		if ch.Action == "updated" {
			state = "out of date (" + ch.Reason + ")"
		}
		if mode == checkOnly {
			return nil, fmt.Errorf("stream %s is %s: %w", d.stream, state, ErrNotDeclared)
		}
		if err := d.apply(ctx, js, copies); err != nil {
			if denied(js, err) {
				return changes, fmt.Errorf("stream %s is %s and this user may not declare it (%v): %w",
					d.stream, state, deniedCause(js, err), ErrNotDeclared)
			}
			return changes, fmt.Errorf("declare stream %s (%s): %w", d.stream, state, err)
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

// denied says whether a declaration failed for want of permission: the
// server drops a request the user may not publish, so it times out, and the
// connection's last error names the violation.
func denied(js jetstream.JetStream, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrPermissionViolation) || errors.Is(js.Conn().LastError(), nats.ErrPermissionViolation)
}

func deniedCause(js jetstream.JetStream, err error) error {
	if last := js.Conn().LastError(); errors.Is(last, nats.ErrPermissionViolation) {
		return last
	}
	return err
}

// WaitReady retries Ensure (Check when declare is false) until it succeeds
// or ctx ends: a freshly started or restarted server may need a moment
// before it serves API calls, and in a deployment the declare step may not
// have run yet. Failures are logged at most every few seconds so a process
// that waits says what for.
func WaitReady(ctx context.Context, js jetstream.JetStream, replicas int, declare bool, log zerolog.Logger) error {
	var lastLog time.Time
	for {
		check := Check
		if declare {
			check = Ensure
		}
		err := check(ctx, js, replicas)
		if err == nil {
			return nil
		}
		if time.Since(lastLog) > 5*time.Second {
			log.Warn().Err(err).Msg("waiting for JetStream streams")
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// streamDiff names the first setting of have that differs from want, or "".
func streamDiff(want, have jetstream.StreamConfig) string {
	switch {
	case !sameSet(want.Subjects, have.Subjects):
		return fmt.Sprintf("subjects %v, want %v", have.Subjects, want.Subjects)
	case want.Retention != have.Retention:
		return fmt.Sprintf("retention %v, want %v", have.Retention, want.Retention)
	case want.Discard != have.Discard:
		return fmt.Sprintf("discard %v, want %v", have.Discard, want.Discard)
	case want.Duplicates != have.Duplicates:
		return fmt.Sprintf("duplicate window %v, want %v", have.Duplicates, want.Duplicates)
	case unlimited(int64(want.MaxMsgSize)) != unlimited(int64(have.MaxMsgSize)):
		return fmt.Sprintf("max message size %d, want %d", have.MaxMsgSize, want.MaxMsgSize)
	case unlimited(want.MaxBytes) != unlimited(have.MaxBytes):
		return fmt.Sprintf("max bytes %d, want %d", have.MaxBytes, want.MaxBytes)
	case want.AllowMsgTTL && !have.AllowMsgTTL:
		return "per-message TTL off"
	}
	return storeDiff(want, have)
}

// storeDiff compares the settings Herald sets on every stream, including
// the streams behind KV buckets and object stores.
func storeDiff(want, have jetstream.StreamConfig) string {
	switch {
	case want.MaxAge != have.MaxAge:
		return fmt.Sprintf("max age %v, want %v", have.MaxAge, want.MaxAge)
	case want.Storage != have.Storage:
		return fmt.Sprintf("storage %v, want %v", have.Storage, want.Storage)
	case unlimited(want.MaxMsgsPerSubject) != unlimited(have.MaxMsgsPerSubject):
		return fmt.Sprintf("max messages per subject %d, want %d", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	case unlimited(have.MaxMsgs) != -1:
		return fmt.Sprintf("max messages %d, want no limit", have.MaxMsgs)
	case have.RePublish != nil:
		return fmt.Sprintf("republishes %s to %s", have.RePublish.Source, have.RePublish.Destination)
	case have.Sealed:
		return "sealed"
	case have.Mirror != nil || len(have.Sources) > 0:
		return "mirrors or sources another stream"
	case have.DenyPurge:
		return "purge denied"
	case want.AllowDirect && !have.AllowDirect:
		return "direct get off"
	}
	return ""
}

// unlimited maps the server's "no limit" spellings (0, -1) to one.
func unlimited(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
