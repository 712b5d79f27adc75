package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// The dashboard's budgets page shows each window against its limit and the
// latest alerts, read from the bus the gateways write them to.
func TestDashboardShowsBudgetWindowsAndAlerts(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	budgets := config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Daily: 1, Monthly: 20}}}
	now := time.Now().UTC()
	day := gateway.BudgetWindow{Scope: gateway.ScopeTenant, ID: "acme", Name: "daily", Period: now.Format("2006-01-02"), Limit: 1}
	kv, err := b.JS.KeyValue(ctx, bus.BucketSpend)
	require.NoError(t, err)
	_, err = kv.Put(ctx, day.Key(), []byte("800000000"))
	require.NoError(t, err)
	for _, th := range []float64{50, 75} {
		_, err = kv.Put(ctx, gateway.AlertMarker(day, th), []byte("sent"))
		require.NoError(t, err)
		require.NoError(t, bus.PublishJSON(ctx, b.JS, bus.BudgetAlertsSubject, "", proto.BudgetAlert{Tenant: "acme", Scope: "tenant",
			ID: "acme", Window: "daily", Period: day.Period, Spent: 0.8, Limit: 1, Threshold: th, TS: now.Format(time.RFC3339)}))
	}

	h, err := dashboardHandler("clickhouse://127.0.0.1:1/none", "", nil, nil, zerolog.Nop(), budgetsPage(b.JS, budgets))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		return string(body)
	}
	page := get("/budgets")
	require.Contains(t, page, `<td>acme</td><td>daily</td><td>`+day.Period+`</td>`)
	require.Contains(t, page, `$0.8000`)
	require.Contains(t, page, `80.0%`)
	require.Contains(t, page, `50% 75% `, "the thresholds alerted this period")
	require.Contains(t, page, `<td>monthly</td><td>`+now.Format("2006-01")+`</td>`)
	require.Contains(t, page, `id="budget-alerts"`)

	var v budgetsView
	require.NoError(t, json.Unmarshal([]byte(get("/api/budgets")), &v))
	require.Len(t, v.Windows, 2)
	require.Len(t, v.Alerts, 2)
	require.Equal(t, 75.0, v.Alerts[0].Threshold, "newest first")
}
