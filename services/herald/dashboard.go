package main

import (
	"net/http"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/rs/zerolog"
)

// dashboardHandler is accounting's cost dashboard over the ClickHouse at dsn.
// It answers requests for loopback names and hosts only (pkg/httpguard).
// mounts add pages under the same rule (the budgets page).
func dashboardHandler(dsn, token string, hosts []string, transcripts accounting.Transcripts, log zerolog.Logger,
	mounts ...func(mount func(string, http.Handler))) (http.Handler, error) {
	d := accounting.NewDashboard(dsn, token, log)
	d.AllowHosts(hosts...)
	d.SetTranscripts(transcripts)
	d.Handle("GET /metrics", telemetry.Handler()) // under the dashboard's access rule
	for _, m := range mounts {
		m(d.Handle)
	}
	return d, nil
}

// capacityMount serves h at /capacity and /capacity.json: what `herald
// status` shows, under the dashboard's access rule.
func capacityMount(h http.Handler) func(mount func(string, http.Handler)) {
	return func(mount func(string, http.Handler)) {
		mount("GET /capacity", h)
		mount("GET /capacity.json", h)
	}
}
