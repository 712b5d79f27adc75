package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// getAs asks url with Host header host; it returns the status and body.
func getAs(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// A web page the user visits rebinds its own name (attacker.example) to
// 127.0.0.1 and reads the loopback dashboard of `herald up` and the
// /metrics of `herald serve --metrics`: both refuse its Host on every route,
// and answer loopback names and the configured dashboard.allowed_hosts.
func TestDashboardAndMetricsRefuseARebindingHost(t *testing.T) {
	dash := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	up := startUpProcess(t, "http://127.0.0.1:1", 0, upOptions{http: dash,
		env: map[string]string{"HERALD_DASHBOARD_ALLOWED_HOSTS": "herald.internal, dash.example"}})
	_ = up
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := startCluster(t, nil)
	c.env["HERALD_DASHBOARD_ALLOWED_HOSTS"] = "herald.internal"
	c.serve("memory", "--metrics", metrics)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "herald serve --metrics never listened")
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + dash + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the dashboard of herald up never listened")

	routes := []string{"http://" + dash + "/", "http://" + dash + "/api/overview", "http://" + dash + "/api/cost",
		"http://" + dash + "/sessions/s-1", "http://" + dash + "/sessions/s-1/trace", "http://" + dash + "/api/sessions/s-1",
		"http://" + dash + "/metrics", "http://" + dash + "/no-such-page", "http://" + metrics + "/metrics", "http://" + metrics + "/"}
	for _, url := range routes {
		for _, host := range []string{"attacker.example:8080", "attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io"} {
			code, body := getAs(t, url, host)
			require.Equal(t, http.StatusForbidden, code, "%s with Host %s", url, host)
			require.NotContains(t, body, "herald_", "%s with Host %s leaked metrics", url, host)
		}
	}
	for _, url := range []string{"http://" + dash + "/metrics", "http://" + metrics + "/metrics"} {
		for _, host := range []string{"localhost", "localhost:8080", "127.0.0.1", "[::1]:9", "herald.internal", "HERALD.INTERNAL:443"} {
			code, body := getAs(t, url, host)
			require.Equal(t, http.StatusOK, code, "%s with Host %s: %s", url, host, body)
			require.Contains(t, body, "# TYPE")
		}
	}
	// The other routes answer loopback names as before (ClickHouse or not).
	for _, url := range routes[:6] {
		code, _ := getAs(t, url, "localhost")
		require.NotEqual(t, http.StatusForbidden, code, url)
	}
	code, _ := getAs(t, "http://"+dash+"/api/overview", "dash.example")
	require.NotEqual(t, http.StatusForbidden, code, "a configured host is answered")
	code, _ = getAs(t, "http://"+metrics+"/metrics", "dash.example")
	require.Equal(t, http.StatusForbidden, code, "each process answers its own configuration's hosts")
}
