package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// Targets of the memory tool.
const (
	TargetMemory = "memory"
	TargetUser   = "user"
)

// EntrySeparator joins a store's entries in the snapshot and counts towards
// its character limit.
const EntrySeparator = "\n§\n"

// maxCASAttempts bounds how often an update retries after losing a
// compare-and-set race to another memory instance.
const maxCASAttempts = 50

// Store is one tenant's memory stores on the KV bucket.
type Store struct {
	kv jetstream.KeyValue
}

// storedEntries is a store's value on the bucket.
type storedEntries struct {
	Entries []string `json:"entries"`
}

func storeKey(tenant, target string) string { return bus.Token(tenant) + "." + target }

// Entries returns a store's entries (none when it was never written).
func (s *Store) Entries(ctx context.Context, tenant, target string) ([]string, error) {
	entries, _, err := s.load(ctx, storeKey(tenant, target))
	return entries, err
}

func (s *Store) load(ctx context.Context, key string) ([]string, uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read memory %s: %w", key, err)
	}
	var v storedEntries
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return nil, 0, fmt.Errorf("memory %s is corrupt: %w", key, err)
	}
	return v.Entries, e.Revision(), nil
}

// Update applies change to a store with compare-and-set on its revision,
// retrying when another instance wrote in between, so concurrent updates are
// never lost. change may be called several times; its error aborts.
func (s *Store) Update(ctx context.Context, tenant, target string, change func([]string) ([]string, error)) ([]string, error) {
	key := storeKey(tenant, target)
	for range maxCASAttempts {
		cur, rev, err := s.load(ctx, key)
		if err != nil {
			return nil, err
		}
		next, err := change(append([]string(nil), cur...))
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(storedEntries{Entries: next})
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, data)
		} else {
			_, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return next, nil
		}
		if !isConflict(err) {
			return nil, fmt.Errorf("write memory %s: %w", key, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, errStoreBusy
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// joinedLen is how many characters entries take once joined for the prompt.
func joinedLen(entries []string) int {
	return len([]rune(strings.Join(entries, EntrySeparator)))
}
