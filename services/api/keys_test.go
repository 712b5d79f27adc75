package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/services/api"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// inProcess is the api service alone on a real in-process JetStream: enough
// for its access rule, which needs no other service.
func inProcess(t *testing.T) (*api.Service, jetstream.JetStream) {
	t.Helper()
	b := heraldtest.StartBus(t)
	svc, err := api.New(api.ConfigFrom(config.Default()), service.Deps{NC: b.NC, JS: b.JS, Log: heraldtest.Logger(t), Config: config.Default()})
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	return svc, b.JS
}

func serve(svc *api.Service, remote, key, method, path, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = remote
	req.Host = "localhost:8080"
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, req)
	return rec
}

func errorCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e apiErr
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "body: %s", rec.Body.String())
	require.NotEmpty(t, e.Error.Message)
	return e.Error.Code
}

func TestWithoutKeysOnlyLoopbackIsAnsweredWhateverTheHeadersClaim(t *testing.T) {
	svc, js := inProcess(t)
	for _, remote := range []string{"203.0.113.7:5000", "[2001:db8::1]:5000", "10.0.0.1:1", "garbage"} {
		rec := serve(svc, remote, "", "POST", "/v1/runs", `{"prompt":"hi"}`,
			"X-Forwarded-For", "127.0.0.1", "X-Real-IP", "127.0.0.1", "Host", "localhost")
		require.Equal(t, http.StatusForbidden, rec.Code, remote)
		require.Equal(t, "loopback_only", errorCode(t, rec))
		rec = serve(svc, remote, "hk_forged", "GET", "/v1/runs/x", "")
		require.Equal(t, http.StatusForbidden, rec.Code, "a bearer token is ignored while no key exists")
	}
	rec := serve(svc, "127.0.0.1:4000", "anything", "POST", "/v1/runs", `{"prompt":"hi"}`)
	require.Equal(t, http.StatusOK, rec.Code, "loopback is answered, its bearer token ignored: %s", rec.Body.String())
	rec = serve(svc, "[::1]:4000", "", "GET", "/v1/runs/nope", "")
	require.Equal(t, http.StatusNotFound, rec.Code)
	// A web page rebinding its own name to 127.0.0.1 reaches loopback from
	// the user's browser; its requests name the page's host and are refused.
	for _, host := range []string{"evil.test:8080", "localhost.evil.test", "127.0.0.1.nip.io:8080"} {
		rec = serve(svc, "127.0.0.1:4000", "", "POST", "/v1/runs", `{"prompt":"hi"}`, "Host", host)
		require.Equal(t, http.StatusForbidden, rec.Code, host)
		require.Equal(t, "host_not_allowed", errorCode(t, rec))
	}

	// Once a key exists, loopback needs one too.
	_, secret, err := api.CreateKey(context.Background(), js, "acme", "ci", 0)
	require.NoError(t, err)
	rec = serve(svc, "127.0.0.1:4000", "", "POST", "/v1/runs", `{"prompt":"hi"}`)
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, "invalid_api_key", errorCode(t, rec))
	rec = serve(svc, "203.0.113.7:5000", secret, "POST", "/v1/runs", `{"prompt":"hi"}`)
	require.Equal(t, http.StatusOK, rec.Code, "a valid key is answered from anywhere: %s", rec.Body.String())
}

func TestForgedAndAlteredKeysAreRefused(t *testing.T) {
	svc, js := inProcess(t)
	k, secret, err := api.CreateKey(context.Background(), js, "acme", "", 0)
	require.NoError(t, err)
	flip := []byte(secret)
	flip[len(flip)-1] ^= 1
	other := strings.Replace(secret, k.ID[len("key_"):], "000000000000", 1)
	for _, bad := range []string{string(flip), other, secret[:len(secret)-1], secret + "0", "hk_", k.ID,
		strings.ToUpper(secret), "Basic " + secret} {
		rec := serve(svc, "127.0.0.1:1", bad, "GET", "/v1/runs/x", "")
		require.Equal(t, http.StatusUnauthorized, rec.Code, "key %q", bad)
	}
	req := httptest.NewRequest("GET", "/v1/runs/x", nil)
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Authorization", "Basic "+secret)
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code, "only a Bearer token is a key")
	rec = serve(svc, "127.0.0.1:1", secret, "GET", "/v1/runs/x", "")
	require.Equal(t, http.StatusNotFound, rec.Code, "the real key passes")
}

func TestKeysBucketHoldsOnlyHashes(t *testing.T) {
	_, js := inProcess(t)
	ctx := context.Background()
	_, secret, err := api.CreateKey(ctx, js, "acme", "n", 2)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, bus.BucketAPIKeys)
	require.NoError(t, err)
	keys, err := kv.Keys(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	e, err := kv.Get(ctx, keys[0])
	require.NoError(t, err)
	require.NotContains(t, string(e.Value()), secret[len("hk_")+12:], "the secret is not stored")
	require.Contains(t, string(e.Value()), `"sha256"`)
	for _, bad := range []string{"", "a.b", "acme corp", strings.Repeat("x", 129), "ünï"} {
		_, _, err := api.CreateKey(ctx, js, bad, "", 0)
		require.ErrorIs(t, err, api.ErrInvalidKey, "tenant %q", bad)
	}
	_, _, err = api.CreateKey(ctx, js, "acme", "", -1)
	require.ErrorIs(t, err, api.ErrInvalidKey)
	require.ErrorIs(t, api.RevokeKey(ctx, js, "key_000000000000"), api.ErrNoSuchKey)
	require.ErrorIs(t, api.RevokeKey(ctx, js, "../x"), api.ErrNoSuchKey)
}

func TestKeysBindTheirTenantAndRevocationIsImmediate(t *testing.T) {
	h := startHerald(t, "")
	out, _, code := h.cli(t, "keys", "create", "--tenant", "acme", "--name", "ci", "--json")
	require.Equal(t, 0, code)
	var acme struct{ ID, Key, Tenant string }
	require.NoError(t, json.Unmarshal([]byte(out), &acme))
	require.Equal(t, "acme", acme.Tenant)
	out, errOut, code := h.cli(t, "keys", "create", "--tenant", "beta")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	beta := lines[len(lines)-1]
	require.True(t, strings.HasPrefix(beta, "hk_"), "the key alone on the last line: %q", out)

	out, _, code = h.cli(t, "keys", "list", "--json")
	require.Equal(t, 0, code)
	require.NotContains(t, out, acme.Key)
	require.NotContains(t, out, beta)
	require.NotContains(t, out, "sha256")
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 2)
	out, _, _ = h.cli(t, "keys", "list")
	require.Contains(t, out, acme.ID)
	require.Contains(t, out, "ci")
	require.NotContains(t, out, acme.Key)

	_, _, code = h.cli(t, "keys", "create", "--tenant", "no such tenant")
	require.Equal(t, 2, code)
	_, _, code = h.cli(t, "keys", "create")
	require.Equal(t, 2, code)

	// No key, loopback included: 401.
	var e apiErr
	resp := call(t, "POST", h.URL+"/v1/runs", "", map[string]any{"prompt": "hi"}, &e)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// A key's run is its tenant's: published on herald.apitasks.acme.
	rc := startRun(t, h, acme.Key, map[string]any{"prompt": "say: for acme"})
	require.Equal(t, "acme", rc.Tenant)
	st := waitRun(t, h, acme.Key, rc.RunID)
	require.Equal(t, "completed", st.Status)
	js := h.js(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := bus.LastOnSubject(ctx, js, bus.StreamSessions, bus.TenantSessionResult("acme", rc.SessionID))
	require.NoError(t, err, "the session is bound to acme: its result is on acme's subject too")
	require.Equal(t, acme.ID, sessionRecord(t, js, rc.SessionID).APIKeyID, "the run carries its key, whose budget its calls are charged to")

	resp = call(t, "POST", h.URL+"/v1/runs", acme.Key, map[string]any{"prompt": "hi", "tenant": "beta"}, &e)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "tenant_mismatch", e.Error.Code)
	for _, field := range []string{"api_key_id", "schedule_id"} {
		resp = call(t, "POST", h.URL+"/v1/runs", acme.Key, map[string]any{"prompt": "hi", field: "key_of_someone_else"}, &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a body cannot name the key or schedule to charge: %s", field)
		require.Contains(t, e.Error.Message, "set by Herald from the key and schedule that start a run")
	}

	// Another tenant's key sees none of it, not even the session.
	for _, path := range []string{"/v1/runs/" + rc.RunID, "/v1/runs/" + rc.RunID + "/events"} {
		resp = call(t, "GET", h.URL+path, beta, nil, &e)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	for _, path := range []string{"/cancel", "/input"} {
		resp = call(t, "POST", h.URL+"/v1/runs/"+rc.RunID+path, beta, map[string]any{"request_id": "r", "answer": "x"}, &e)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	resp = call(t, "POST", h.URL+"/v1/runs", beta, map[string]any{"prompt": "hi", "session_id": rc.SessionID}, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "beta cannot continue acme's session")
	resp = call(t, "POST", h.URL+"/v1/runs", beta, map[string]any{"prompt": "hi", "task_id": rc.RunID}, &e)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "nor take its run id")

	// Schedules are a key's tenant's too.
	var sc struct{ ID, Tenant string }
	resp = call(t, "POST", h.URL+"/v1/schedules", acme.Key, map[string]any{"every": "1h", "prompt": "hourly"}, &sc)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "acme", sc.Tenant)
	resp = call(t, "POST", h.URL+"/v1/schedules", acme.Key, map[string]any{"every": "1h", "prompt": "x", "tenant": "beta"}, &e)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var list struct{ Data []map[string]any }
	call(t, "GET", h.URL+"/v1/schedules", beta, nil, &list)
	require.Empty(t, list.Data, "beta sees none of acme's schedules")
	for _, m := range []string{"GET", "DELETE"} {
		resp = call(t, m, h.URL+"/v1/schedules/"+sc.ID, beta, nil, &e)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	}
	resp = call(t, "POST", h.URL+"/v1/schedules/"+sc.ID+"/pause", beta, nil, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	call(t, "GET", h.URL+"/v1/schedules", acme.Key, nil, &list)
	require.Len(t, list.Data, 1)

	// Revoked: the very next request is refused.
	_, _, code = h.cli(t, "keys", "revoke", acme.ID)
	require.Equal(t, 0, code)
	resp = call(t, "GET", h.URL+"/v1/runs/"+rc.RunID, acme.Key, nil, &e)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	_, _, code = h.cli(t, "keys", "revoke", acme.ID)
	require.Equal(t, 2, code, "revoking an unknown key is a usage error")
	resp = call(t, "GET", h.URL+"/v1/runs/"+rc.RunID, beta, nil, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "beta still works, and still sees nothing of acme")
}

// sessionRecord reads what the loop keeps of a session (herald_sessions).
func sessionRecord(t *testing.T, js jetstream.JetStream, sid string) struct {
	APIKeyID   string `json:"api_key_id"`
	ScheduleID string `json:"schedule_id"`
} {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	e, err := kv.Get(ctx, sid)
	require.NoError(t, err)
	var rec struct {
		APIKeyID   string `json:"api_key_id"`
		ScheduleID string `json:"schedule_id"`
	}
	require.NoError(t, json.Unmarshal(e.Value(), &rec))
	return rec
}
