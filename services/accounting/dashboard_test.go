package accounting

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// dashboardFixture is a running accounting service with a few sessions of
// usage and tool runs, and its dashboard on a real HTTP server.
type dashboardFixture struct {
	dsn string
	url string
}

func startDashboardFixture(t *testing.T, token string) dashboardFixture {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	cfg := testConfig(dsn)
	cfg.DashboardToken = token
	svc := startService(t, b, cfg)
	now := time.Now()
	var evs []*heraldpb.UsageEvent
	for i := range 40 {
		e := usageEvent(fmt.Sprintf("d-%d", i), []string{"acme", "globex"}[i%5%2], fmt.Sprintf("sess-%d", i%5),
			[]string{"gpt-4o", "gpt-4o-mini", "claude-sonnet"}[i%3], now.Add(-time.Duration(i)*20*time.Minute), 1000+int64(i), 100, uint64(1000*(i+1)))
		e.Purpose = []string{"agent", "agent", "compression", "subagent"}[i%4]
		if i%7 == 0 {
			e.Status, e.ErrorClass, e.Provider = "error", "rate_limit", "anthropic"
		}
		evs = append(evs, e)
	}
	publishUsage(t, b.JS, "", evs...)
	ctx := context.Background()
	for i := range 12 {
		ev := &heraldpb.ToolEvent{EventId: fmt.Sprintf("tool-%d", i), TsUnixMs: now.UnixMilli(), Tenant: "acme", SessionId: "sess-0",
			CallId: fmt.Sprintf("call-%d", i), Tool: []string{"terminal", "read_file"}[i%2], Runner: "r1", DurationMs: int64(10 * (i + 1)), Status: "ok"}
		require.NoError(t, bus.PublishProto(ctx, b.JS, bus.ToolEventSubject("acme"), ev.EventId, ev))
	}
	waitDrained(t, b.JS, bus.StreamUsage)
	waitDrained(t, b.JS, bus.StreamToolEvents)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return dashboardFixture{dsn: dsn, url: srv.URL}
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.Unmarshal(body, v), string(body))
	return resp.StatusCode
}

func TestDashboardAPIAgreesWithQueryCost(t *testing.T) {
	f := startDashboardFixture(t, "")
	ctx := context.Background()

	var ov Overview
	require.Equal(t, http.StatusOK, getJSON(t, f.url+"/api/overview?range=24h", &ov))
	want, err := QueryCost(ctx, f.dsn, CostQuery{By: "model", Since: 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, want.Total.CostNanoUSD, ov.Total.CostNanoUSD)
	require.Equal(t, want.Total.Calls, ov.Total.Calls)
	require.Equal(t, want.Rows, ov.Models)
	var series uint64
	for _, line := range ov.Spend.CostNano {
		for _, v := range line {
			series += v
		}
	}
	require.Equal(t, want.Total.CostNanoUSD, series, "the chart adds up to the total")
	require.Equal(t, "hour", ov.Spend.Bucket)
	require.Len(t, ov.Tenants, 2)
	require.Len(t, ov.Purposes, 3)
	require.Equal(t, "anthropic", ov.Providers[0].Provider, "the failing provider is listed first")
	require.InDelta(t, 1.0, ov.Providers[0].ErrorRate, 1e-9)
	require.Len(t, ov.Tools, 2)
	require.Equal(t, uint64(6), ov.Tools[0].Calls)

	var acme Overview
	getJSON(t, f.url+"/api/overview?range=all&tenant=acme", &acme)
	wantAcme, err := QueryCost(ctx, f.dsn, CostQuery{By: "model", Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, wantAcme.Total, acme.Total)
	require.Equal(t, "day", acme.Spend.Bucket)

	var rep CostReport
	require.Equal(t, http.StatusOK, getJSON(t, f.url+"/api/cost?by=purpose&since=7d", &rep))
	wantPurpose, err := QueryCost(ctx, f.dsn, CostQuery{By: "purpose", Since: 7 * 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, wantPurpose.Rows, rep.Rows)

	var det SessionDetail
	require.Equal(t, http.StatusOK, getJSON(t, f.url+"/api/sessions/sess-0", &det))
	wantSess, err := QueryCost(ctx, f.dsn, CostQuery{By: "session", Session: "sess-0"})
	require.NoError(t, err)
	require.Equal(t, wantSess.Total.CostNanoUSD, det.Total.CostNanoUSD)
	require.Len(t, det.Steps, 8)
	require.True(t, det.Steps[0].TS.Before(det.Steps[7].TS), "steps in time order")
	require.Len(t, det.Tools, 12)

	var bad map[string]string
	require.Equal(t, http.StatusBadRequest, getJSON(t, f.url+"/api/cost?by=colour", &bad))
	require.Contains(t, bad["error"], "colour")
	require.Equal(t, http.StatusNotFound, getJSON(t, f.url+"/api/sessions/nope", &bad))
}

func TestDashboardNeedsItsTokenWhenOneIsSet(t *testing.T) {
	f := startDashboardFixture(t, "s3cret")

	resp, err := http.Get(f.url + "/api/overview")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, _ := http.NewRequest("GET", f.url+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(f.url + "/?token=s3cret")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == DashboardTokenCookie {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "the token is kept in a cookie so links work")
	req, _ = http.NewRequest("GET", f.url+"/sessions/sess-0", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	req, _ = http.NewRequest("GET", f.url+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestDashboardWithoutTokenAnswersLoopbackOnly(t *testing.T) {
	d := NewDashboard(testServerDSN, "", heraldtest.Logger(t))
	defer d.Close()
	req := httptest.NewRequest("GET", "/api/overview", nil)
	req.RemoteAddr, req.Host = "192.0.2.7:40000", "127.0.0.1:8080"
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Contains(t, rec.Body.String(), "loopback")
}

func TestDashboardSaysWhenClickHouseIsAway(t *testing.T) {
	d := NewDashboard("", "", heraldtest.Logger(t))
	srv := httptest.NewServer(d)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, string(body), "HERALD_CLICKHOUSE_DSN")
}
