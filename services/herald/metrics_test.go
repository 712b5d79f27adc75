package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// herald up serves /metrics on its dashboard address, under the dashboard's
// own access rule.
func TestUpServesMetricsUnderTheDashboardToken(t *testing.T) {
	h, err := dashboardHandler("clickhouse://127.0.0.1:1/none", "s3cret", nil, nil, zerolog.Nop())
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token, no metrics")

	req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "# TYPE herald_trace_spans_dropped_total counter")
}

func TestServeMetricsFlagServesPrometheusText(t *testing.T) {
	stop, err := serveMetrics("127.0.0.1:0", nil, zerolog.Nop())
	require.NoError(t, err)
	stop()
	_, err = serveMetrics("not an address", nil, zerolog.Nop())
	require.ErrorContains(t, err, "--metrics")
}
