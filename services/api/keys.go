package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/nats-io/nats.go/jetstream"
)

// Key is a stored API key: who it is and the SHA-256 of its secret; the
// secret itself is shown once, when the key is created, and never stored.
type Key struct {
	ID            string    `json:"id"`
	Name          string    `json:"name,omitempty"`
	Tenant        string    `json:"tenant"`
	MaxConcurrent int       `json:"max_concurrent,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	SHA256        string    `json:"sha256,omitempty"`
}

// ErrNoSuchKey says no key has the given id.
var ErrNoSuchKey = errors.New("no such key")

// ErrInvalidKey says a key could not be created as asked.
var ErrInvalidKey = errors.New("invalid key")

// A secret is "hk_" + the key's 12 hex id + 64 hex characters of randomness:
// its id is read from it, so a request costs one lookup.
const (
	secretPrefix = "hk_"
	idHexLen     = 12
	secretHexLen = 64
	keyIDPrefix  = "key_"
)

// CreateKey stores a new key bound to tenant and returns it with its secret.
func CreateKey(ctx context.Context, js jetstream.JetStream, tenant, name string, maxConcurrent int) (Key, string, error) {
	switch {
	case !config.ValidTenant(tenant):
		return Key{}, "", fmt.Errorf("%w: tenant %q must be 1 to 128 letters, digits, '-' or '_'", ErrInvalidKey, tenant)
	case maxConcurrent < 0:
		return Key{}, "", fmt.Errorf("%w: --max-concurrent must not be negative", ErrInvalidKey)
	case len(name) > 200:
		return Key{}, "", fmt.Errorf("%w: name is longer than 200 characters", ErrInvalidKey)
	}
	kv, err := js.KeyValue(ctx, bus.BucketAPIKeys)
	if err != nil {
		return Key{}, "", fmt.Errorf("keys bucket: %w", err)
	}
	random := make([]byte, idHexLen/2+secretHexLen/2)
	if _, err := rand.Read(random); err != nil {
		return Key{}, "", err
	}
	all := hex.EncodeToString(random)
	id, secret := keyIDPrefix+all[:idHexLen], secretPrefix+all
	k := Key{ID: id, Name: name, Tenant: tenant, MaxConcurrent: maxConcurrent, CreatedAt: time.Now().UTC(), SHA256: digest(secret)}
	data, _ := json.Marshal(k)
	if _, err := kv.Create(ctx, id, data); err != nil {
		return Key{}, "", fmt.Errorf("store key: %w", err)
	}
	k.SHA256 = ""
	return k, secret, nil
}

// ListKeys returns every key, oldest first, without their hashes.
func ListKeys(ctx context.Context, js jetstream.JetStream) ([]Key, error) {
	kv, err := js.KeyValue(ctx, bus.BucketAPIKeys)
	if err != nil {
		return nil, fmt.Errorf("keys bucket: %w", err)
	}
	ids, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	var keys []Key
	for _, id := range ids {
		k, err := getKey(ctx, kv, id)
		if errors.Is(err, ErrNoSuchKey) {
			continue // revoked while listing
		}
		if err != nil {
			return nil, err
		}
		k.SHA256 = ""
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return keys, nil
}

// RevokeKey deletes a key: the next request bearing it is refused.
func RevokeKey(ctx context.Context, js jetstream.JetStream, id string) error {
	kv, err := js.KeyValue(ctx, bus.BucketAPIKeys)
	if err != nil {
		return fmt.Errorf("keys bucket: %w", err)
	}
	if _, err := getKey(ctx, kv, id); err != nil {
		return err
	}
	return kv.Delete(ctx, id)
}

func getKey(ctx context.Context, kv jetstream.KeyValue, id string) (Key, error) {
	if !validKeyID(id) {
		return Key{}, fmt.Errorf("%w %q", ErrNoSuchKey, id)
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Key{}, fmt.Errorf("%w %q", ErrNoSuchKey, id)
	}
	if err != nil {
		return Key{}, fmt.Errorf("read key %s: %w", id, err)
	}
	var k Key
	if err := json.Unmarshal(e.Value(), &k); err != nil {
		return Key{}, fmt.Errorf("key %s is unreadable: %w", id, err)
	}
	return k, nil
}

// lookupSecret finds the key a secret belongs to, or ErrNoSuchKey; the hash
// is compared in constant time.
func lookupSecret(ctx context.Context, kv jetstream.KeyValue, secret string) (Key, error) {
	rest, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok || len(rest) != idHexLen+secretHexLen || !isHex(rest) {
		return Key{}, ErrNoSuchKey
	}
	k, err := getKey(ctx, kv, keyIDPrefix+rest[:idHexLen])
	if err != nil {
		return Key{}, err
	}
	if subtle.ConstantTimeCompare([]byte(k.SHA256), []byte(digest(secret))) != 1 {
		return Key{}, ErrNoSuchKey
	}
	return k, nil
}

func digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func validKeyID(id string) bool {
	rest, ok := strings.CutPrefix(id, keyIDPrefix)
	return ok && len(rest) == idHexLen && isHex(rest)
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
