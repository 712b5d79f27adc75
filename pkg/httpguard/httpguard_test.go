package httpguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostsRefusesNamesOtherThanLoopbackAndTheConfiguredOnes(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secret data") })
	h := Hosts(ok, "Dash.Example.com", "10.0.0.5")
	for host, want := range map[string]int{
		"localhost":             200,
		"LOCALHOST:8080":        200,
		"localhost.:8080":       200,
		"127.0.0.1":             200,
		"127.0.0.1:9090":        200,
		"127.8.9.10:1":          200,
		"[::1]:8080":            200,
		"[::1]":                 200,
		"dash.example.com:443":  200,
		"dash.example.com.":     200,
		"10.0.0.5:8080":         200,
		"[::ffff:127.0.0.1]:80": 200,
		// DNS rebinding: the attacker's own name, resolved to 127.0.0.1.
		"attacker.example:8080":      403,
		"attacker.example":           403,
		"localhost.attacker.example": 403,
		"127.0.0.1.attacker.example": 403,
		"localhost@attacker.example": 403,
		"evil.localhost":             403,
		"example.com":                403,
		"10.0.0.6":                   403,
		"0.0.0.0:8080":               403,
		"2130706433":                 403, // 127.0.0.1 as a number: browsers accept it, this rule does not need to
		"":                           403,
		"[::1":                       403,
		"dash.example.com.evil":      403,
	} {
		req := httptest.NewRequest("GET", "/api/overview", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, "Host %q", host)
		if want == 403 {
			require.NotContains(t, rec.Body.String(), "secret data")
			require.Contains(t, rec.Body.String(), "dashboard.allowed_hosts")
		}
		require.Equal(t, want == 200, Allowed(host, "dash.example.com", "10.0.0.5"), "Host %q", host)
	}
}

func TestHostsKeepsAHostileHostShortAndPrintable(t *testing.T) {
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "evil\x1b[31m" + string(make([]byte, 500))
	rec := httptest.NewRecorder()
	Hosts(http.NotFoundHandler()).ServeHTTP(rec, req)
	require.Equal(t, 403, rec.Code)
	require.NotContains(t, rec.Body.String(), "\x1b")
	require.Less(t, len(rec.Body.String()), 400)
}

func TestListenHostsAreWhatTheServerWasToldToListenOn(t *testing.T) {
	require.Equal(t, []string{"10.0.0.5"}, ListenHosts("10.0.0.5:9464"))
	require.Equal(t, []string{"metrics.internal"}, ListenHosts("metrics.internal:9464"))
	require.Equal(t, []string{"127.0.0.1"}, ListenHosts("127.0.0.1:0"))
	require.Nil(t, ListenHosts("no port"))
	all := ListenHosts(":9464")
	require.Contains(t, all, "127.0.0.1", "every interface, loopback among them")
	require.Equal(t, all, ListenHosts("0.0.0.0:9464"))
	// Still no name a rebinding page could bring.
	h := Hosts(http.NotFoundHandler(), all...)
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Host = "attacker.example:9464"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
}
