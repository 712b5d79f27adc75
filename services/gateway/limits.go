package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
)

// sharedLimits holds one provider to providers.<name>.max_concurrent, rpm
// and tpm across every gateway process on the bus. The state is one record
// per provider in the KV bucket herald_provider_limits, changed only by
// compare-and-set on its revision, so two gateways never both take the last
// slot:
//   - holders: the calls each gateway process has in flight, each entry
//     with an expiry the process renews while it holds any, so the slots of
//     a gateway killed mid-call come back within holderTTL;
//   - rpm_at, tpm_at: the rates as GCRA ("virtual scheduling"): the time the
//     next request (or token) is due; a call reserves its start by moving
//     them on, then waits for its start. One second's worth may go at once.
//   - paused_until: a 429's Retry-After, so every gateway holds off;
//   - cap, cut_at: max_concurrent as the provider's 429s moved it (AIMD,
//     as adaptive.go for one process, here for all of them): a 429 of a
//     call sent after the last cut halves the calls in flight, answers of
//     such calls add one per cap's worth, back up to max_concurrent.
//
// Why one record and not a lease per slot: taking a free slot out of N
// leases needs a scan or a watch (a consumer per gateway) to find it, and a
// rate needs a record anyway; one record serves both with a read and a
// write per call and per answer, noise beside a model call's latency.
type sharedLimits struct {
	bucket *bus.LazyBucket
	key    string
	owner  string
	prof   config.ProviderProfile
	now    func() time.Time

	mu    sync.Mutex
	held  int
	freed chan struct{}
}

// providerRecord is a provider's shared state (see sharedLimits).
type providerRecord struct {
	Holders     map[string]holder `json:"holders,omitempty"`
	RPMAt       int64             `json:"rpm_at,omitempty"`
	TPMAt       int64             `json:"tpm_at,omitempty"`
	PausedUntil int64             `json:"paused_until,omitempty"`
	Cap         float64           `json:"cap,omitempty"`
	CutAt       int64             `json:"cut_at,omitempty"`
}

type holder struct {
	N     int   `json:"n"`
	Until int64 `json:"until"`
}

const (
	// holderTTL is how long a gateway's calls count after it last renewed them.
	holderTTL = 30 * time.Second
	// pollFull is how often a gateway whose calls all wait for a slot
	// another gateway holds looks again (a slot freed here wakes it at once).
	pollFull = 50 * time.Millisecond
	// maxPause bounds a pause a provider asks for.
	maxPause = 2 * time.Minute
)

var unsafeKey = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func newSharedLimits(js jetstream.JetStream, provider string, prof config.ProviderProfile) *sharedLimits {
	return &sharedLimits{bucket: bus.NewLazyBucket(js, bus.BucketProviderLimits),
		key: "provider." + unsafeKey.ReplaceAllString(provider, "_"), owner: rand.Text(), prof: prof,
		now: time.Now, freed: make(chan struct{})}
}

// acquire waits until a call of cost tokens (estimated) may be sent: its
// rate reservation is due, no pause holds, and fewer than max_concurrent
// calls are in flight across the gateways; the call is then counted.
// waiting (if not nil) is told each time the call waits, with the limit
// that holds it (proto.Limit*) and how long that is known to last (0: until
// a call ends).
func (l *sharedLimits) acquire(ctx context.Context, cost int64, waiting func(limit string, d time.Duration)) error {
	note := func(limit string, d time.Duration) {
		if waiting != nil && d >= 0 {
			waiting(limit, d)
		}
	}
	if l.prof.RPM > 0 || l.prof.TPM > 0 {
		start, by, err := l.reserve(ctx, cost)
		if err != nil {
			return err
		}
		if d := start.Sub(l.now()); d > 0 {
			note(by, d)
			if err := waitFor(ctx, nil, d); err != nil {
				return err
			}
		}
	}
	for {
		kv, rec, rev, err := l.load(ctx)
		if err != nil {
			return err
		}
		now := l.now()
		if pause := time.Duration(rec.PausedUntil - now.UnixNano()); pause > 0 {
			note(proto.LimitPause, pause)
			if err := waitFor(ctx, nil, pause); err != nil {
				return err
			}
			continue
		}
		if l.prof.MaxConcurrent <= 0 {
			return nil
		}
		if rec.inflight(now) >= rec.capacity(l.prof.MaxConcurrent) {
			note(proto.LimitProviderCalls, 0)
			l.mu.Lock()
			freed := l.freed
			l.mu.Unlock()
			if err := waitFor(ctx, freed, pollFull); err != nil {
				return err
			}
			continue
		}
		l.mu.Lock()
		rec.hold(l.owner, l.held+1, now)
		stored, err := l.store(ctx, kv, rec, rev)
		if stored {
			l.held++
		}
		l.mu.Unlock()
		if stored || err != nil {
			return err
		}
	}
}

// reserve takes the next start the rates allow (GCRA) and returns it, with
// the limit that put it latest (proto.Limit*).
func (l *sharedLimits) reserve(ctx context.Context, cost int64) (time.Time, string, error) {
	for {
		kv, rec, rev, err := l.load(ctx)
		if err != nil {
			return time.Time{}, "", err
		}
		now := l.now().UnixNano()
		start, by := max(now, rec.PausedUntil), proto.LimitPause
		if l.prof.RPM > 0 {
			every := int64(time.Minute) / int64(l.prof.RPM)
			burst := max(1, int64(l.prof.RPM)/60)
			if due := rec.RPMAt - (burst-1)*every; due > start {
				start, by = due, proto.LimitProviderRPM
			}
			rec.RPMAt = max(rec.RPMAt, start) + every
		}
		if l.prof.TPM > 0 {
			perToken := int64(time.Minute) / int64(l.prof.TPM)
			if due := rec.TPMAt - int64(time.Second); due > start {
				start, by = due, proto.LimitProviderTPM
			}
			rec.TPMAt = max(rec.TPMAt, start) + max(1, cost)*perToken
		}
		if ok, err := l.store(ctx, kv, rec, rev); ok || err != nil {
			return time.Unix(0, start), by, err
		}
	}
}

// release ends a counted call sent at started: ok for an answer,
// rateLimited for a 429, which cuts the provider's cap and, with
// retryAfter, pauses every gateway's calls to it; extraTokens are tokens the call used
// beyond its estimate, charged to the token rate.
func (l *sharedLimits) release(ctx context.Context, started time.Time, ok, rateLimited bool, retryAfter time.Duration, extraTokens int64) error {
	l.mu.Lock()
	defer func() {
		close(l.freed)
		l.freed = make(chan struct{})
		l.mu.Unlock()
	}()
	counted := l.prof.MaxConcurrent > 0 && l.held > 0
	if counted {
		l.held--
	}
	if !counted && retryAfter <= 0 && (extraTokens <= 0 || l.prof.TPM <= 0) {
		return nil
	}
	for {
		kv, rec, rev, err := l.load(ctx)
		if err != nil {
			return err
		}
		now := l.now()
		if counted {
			rec.hold(l.owner, l.held, now)
			rec.adapt(l.prof.MaxConcurrent, started, ok, rateLimited, now)
		}
		if retryAfter > 0 {
			rec.PausedUntil = max(rec.PausedUntil, now.Add(min(retryAfter, maxPause)).UnixNano())
		}
		if extraTokens > 0 && l.prof.TPM > 0 {
			rec.TPMAt = max(rec.TPMAt, now.UnixNano()) + extraTokens*(int64(time.Minute)/int64(l.prof.TPM))
		}
		if ok, err := l.store(ctx, kv, rec, rev); ok || err != nil {
			return err
		}
	}
}

// renew extends this gateway's hold while it has calls in flight.
func (l *sharedLimits) renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == 0 {
		return nil
	}
	for {
		kv, rec, rev, err := l.load(ctx)
		if err != nil {
			return err
		}
		rec.hold(l.owner, l.held, l.now())
		if ok, err := l.store(ctx, kv, rec, rev); ok || err != nil {
			return err
		}
	}
}

func (l *sharedLimits) load(ctx context.Context) (jetstream.KeyValue, providerRecord, uint64, error) {
	kv, err := l.bucket.Open(ctx)
	if err != nil {
		return nil, providerRecord{}, 0, fmt.Errorf("provider limits bucket: %w", err)
	}
	var rec providerRecord
	e, err := kv.Get(ctx, l.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return kv, rec, 0, nil
	}
	if err != nil {
		return nil, rec, 0, fmt.Errorf("provider limits %s: %w", l.key, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		// an unreadable record is replaced: it only holds counts and times
		rec = providerRecord{}
	}
	return kv, rec, e.Revision(), nil
}

// store writes rec if the record is still at rev; false without an error
// means another gateway changed it first (read it again).
func (l *sharedLimits) store(ctx context.Context, kv jetstream.KeyValue, rec providerRecord, rev uint64) (bool, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	if rev == 0 {
		_, err = kv.Create(ctx, l.key, data)
	} else {
		_, err = kv.Update(ctx, l.key, data, rev)
	}
	if err == nil {
		return true, nil
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) || isWrongSequence(err) {
		return false, nil
	}
	return false, fmt.Errorf("provider limits %s: %w", l.key, err)
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// inflight counts the calls of every gateway whose hold has not expired.
func (r providerRecord) inflight(now time.Time) int {
	n := 0
	for _, h := range r.Holders {
		if h.Until > now.UnixNano() {
			n += h.N
		}
	}
	return n
}

// capacity is the calls the gateways may have in flight: max_concurrent,
// or less while 429s hold it down.
func (r providerRecord) capacity(maxConcurrent int) int {
	if r.Cap > 0 {
		return max(1, min(maxConcurrent, int(r.Cap)))
	}
	return maxConcurrent
}

// adapt moves the cap after a call sent at started ended (AIMD).
func (r *providerRecord) adapt(maxConcurrent int, started time.Time, ok, rateLimited bool, now time.Time) {
	if started.UnixNano() <= r.CutAt {
		return // sent before the last cut: says nothing about it
	}
	switch {
	case rateLimited:
		r.Cap = max(1, float64(min(r.capacity(maxConcurrent), r.inflight(now)+1))/2)
		r.CutAt = now.UnixNano()
	case ok && r.Cap > 0:
		if r.Cap += 1 / r.Cap; r.Cap >= float64(maxConcurrent) {
			r.Cap = 0
		}
	}
}

// hold sets owner's count, renewed, and drops expired holders.
func (r *providerRecord) hold(owner string, n int, now time.Time) {
	if r.Holders == nil {
		r.Holders = map[string]holder{}
	}
	for o, h := range r.Holders {
		if h.Until <= now.UnixNano() {
			delete(r.Holders, o)
		}
	}
	if n <= 0 {
		delete(r.Holders, owner)
		return
	}
	r.Holders[owner] = holder{N: n, Until: now.Add(holderTTL).UnixNano()}
}
