package api

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/heraldrun/herald/pkg/httpguard"

	"github.com/nats-io/nats.go/jetstream"
)

// principal is who a request acts for: a key bound to a tenant, or, while
// no key exists, a loopback client bound to none.
type principal struct {
	key Key
}

func (p principal) keyed() bool { return p.key.ID != "" }

// authenticate applies the access rule: while no key exists the API answers
// loopback clients only and ignores bearer tokens; once one exists every
// request needs a valid key, loopback included. Keys are read per request,
// so a revoked key is refused at once.
func (s *Service) authenticate(r *http.Request) (principal, error) {
	ctx := r.Context()
	if secret, ok := bearer(r); ok {
		k, err := lookupSecret(ctx, s.keys, secret)
		if err == nil {
			return principal{key: k}, nil
		}
		if !errors.Is(err, ErrNoSuchKey) {
			return principal{}, errors.Join(errUnavailable, err)
		}
	}
	any, err := anyKey(ctx, s.keys)
	if err != nil {
		return principal{}, errors.Join(errUnavailable, err)
	}
	if any {
		if _, ok := bearer(r); ok {
			return principal{}, unauthorized("the API key is not valid (revoked, mistyped or never issued)")
		}
		return principal{}, unauthorized("this Herald requires an API key: send Authorization: Bearer <key> (herald keys create)")
	}
	if !loopback(r.RemoteAddr) {
		return principal{}, forbidden("loopback_only",
			"no API key exists yet, so this Herald answers loopback clients only: create one with herald keys create --tenant T")
	}
	// A page the user's browser shows can reach loopback by rebinding its
	// own name to 127.0.0.1; without a key to hold it back, the Host it
	// names must be one this server answers for (pkg/httpguard).
	if !httpguard.Allowed(r.Host, s.cfg.AllowedHosts...) {
		return principal{}, forbidden("host_not_allowed",
			"Host %q is not a loopback name nor in dashboard.allowed_hosts; without an API key this Herald answers requests for those only", r.Host)
	}
	return principal{}, nil
}

// anyKey says whether the keys bucket holds at least one key. An empty
// bucket is told by its stream's state (one request); one that holds
// something may hold only the markers of revoked keys, so its keys are
// listed.
func anyKey(ctx context.Context, kv jetstream.KeyValue) (bool, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return false, err
	}
	if st.Values() == 0 {
		return false, nil
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = lister.Stop() }()
	for range lister.Keys() {
		return true, nil
	}
	return false, ctx.Err()
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
