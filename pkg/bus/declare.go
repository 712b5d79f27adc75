package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// A Change is one stream, bucket or object store that Declare created or
// updated, with why.
type Change struct {
	Stream string // the JetStream stream (KV_<bucket>, OBJ_<bucket> for stores)
	Action string // "created" or "updated"
	Reason string // for an update: the first setting that differed
}

// ErrNotDeclared says the server lacks a stream (or has an older
// declaration of it) that this connection is not allowed to declare.
var ErrNotDeclared = errors.New(`not declared; run "herald declare" as a user allowed to (see deploy/README.md)`)

// declaration is one thing Declare keeps in shape: the stream behind it,
// how far an existing stream's configuration is from it, and how to apply it.
type declaration struct {
	stream  string
	differs func(have jetstream.StreamConfig) string
	apply   func(ctx context.Context, js jetstream.JetStream) error
}

func declarations(replicas int) []declaration {
	var ds []declaration
	for _, cfg := range Streams(replicas) {
		ds = append(ds, declaration{stream: cfg.Name,
			differs: func(have jetstream.StreamConfig) string { return streamDiff(cfg, have) },
			apply: func(ctx context.Context, js jetstream.JetStream) error {
				_, err := js.CreateOrUpdateStream(ctx, cfg)
				return err
			}})
	}
	for _, cfg := range Buckets(replicas) {
		want := jetstream.StreamConfig{MaxMsgsPerSubject: int64(cfg.History), MaxAge: cfg.TTL,
			Storage: cfg.Storage, Replicas: cfg.Replicas}
		ds = append(ds, declaration{stream: "KV_" + cfg.Bucket,
			differs: func(have jetstream.StreamConfig) string { return storeDiff(want, have) },
			apply: func(ctx context.Context, js jetstream.JetStream) error {
				_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
				return err
			}})
	}
	for _, cfg := range ObjectStores(replicas) {
		want := jetstream.StreamConfig{MaxAge: cfg.TTL, Storage: cfg.Storage, Replicas: cfg.Replicas}
		ds = append(ds, declaration{stream: "OBJ_" + cfg.Bucket,
			differs: func(have jetstream.StreamConfig) string { return storeDiff(want, have) },
			apply: func(ctx context.Context, js jetstream.JetStream) error {
				_, err := js.CreateOrUpdateObjectStore(ctx, cfg)
				return err
			}})
	}
	return ds
}

// Declare brings every stream, bucket and object store to this version's
// declaration. It reads what exists first (one STREAM.LIST) and writes only
// what is missing or differs, so a service that finds everything in place
// needs no right to create or update streams: in a deployment with one NATS
// user per service only the admin user that runs "herald declare" holds it.
func Declare(ctx context.Context, js jetstream.JetStream, replicas int) ([]Change, error) {
	return declare(ctx, js, replicas, true)
}

// Check reports, writing nothing, whether every stream, bucket and object
// store is in place as this version declares it; ErrNotDeclared says not.
func Check(ctx context.Context, js jetstream.JetStream, replicas int) error {
	_, err := declare(ctx, js, replicas, false)
	return err
}

func declare(ctx context.Context, js jetstream.JetStream, replicas int, write bool) ([]Change, error) {
	have := map[string]jetstream.StreamConfig{}
	list := js.ListStreams(ctx)
	for info := range list.Info() {
		have[info.Config.Name] = info.Config
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	var changes []Change
	for _, d := range declarations(replicas) {
		ch := Change{Stream: d.stream, Action: "created"}
		if cfg, ok := have[d.stream]; ok {
			if ch.Reason = d.differs(cfg); ch.Reason == "" {
				continue
			}
			ch.Action = "updated"
		}
		state := "missing"
		if ch.Action == "updated" {
			state = "out of date (" + ch.Reason + ")"
		}
		if !write {
			return nil, fmt.Errorf("stream %s is %s: %w", d.stream, state, ErrNotDeclared)
		}
		if err := d.apply(ctx, js); err != nil {
			return changes, fmt.Errorf("stream %s is %s and could not be declared (%v): %w", d.stream, state, err, ErrNotDeclared)
		}
		changes = append(changes, ch)
	}
	return changes, nil
}

// Ensure is Declare for a process that only needs everything in place.
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	_, err := Declare(ctx, js, replicas)
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
	case max(want.Replicas, 1) != max(have.Replicas, 1):
		return fmt.Sprintf("replicas %d, want %d", have.Replicas, want.Replicas)
	case want.MaxMsgsPerSubject != 0 && want.MaxMsgsPerSubject != have.MaxMsgsPerSubject:
		return fmt.Sprintf("history %d, want %d", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
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
