package main

import (
	"net/http"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/rs/zerolog"
)

// dashboardHandler is accounting's cost dashboard over the ClickHouse at dsn.
// It answers requests for loopback names and hosts only (pkg/httpguard).
// With capacity set, /capacity shows what `herald status` does.
func dashboardHandler(dsn, token string, hosts []string, transcripts accounting.Transcripts, log zerolog.Logger, capacity ...http.Handler) (http.Handler, error) {
	d := accounting.NewDashboard(dsn, token, log)
	d.AllowHosts(hosts...)
	d.SetTranscripts(transcripts)
	d.Handle("GET /metrics", telemetry.Handler()) // under the dashboard's access rule
	for _, h := range capacity {
		d.Handle("GET /capacity", h)
		d.Handle("GET /capacity.json", h)
	}
	return d, nil
}
