package main

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// capacityPage serves GET /capacity (HTML, refreshing itself) and
// /capacity.json: what `herald status` prints, for the running Herald. It
// is mounted on the dashboard, behind its Host rule and token.
func capacityPage(js jetstream.JetStream, o capacityOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		rep, err := collectCapacity(ctx, js, o)
		if err != nil {
			http.Error(w, "reading the streams failed: "+err.Error(), http.StatusBadGateway)
			return
		}
		if r.URL.Path == "/capacity.json" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(rep)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = capacityTemplate.Execute(w, rep)
	})
}

var capacityTemplate = template.Must(template.New("capacity").Funcs(template.FuncMap{"age": age}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5"><title>Herald — capacity</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{padding:.2em .8em;text-align:right;border-bottom:1px solid #ddd}td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}
.warn{color:#a00;font-weight:bold}</style></head><body>
<h1>Capacity</h1><p>{{.At.Format "2006-01-02 15:04:05"}} UTC · <a href="/">costs</a> · <a href="/capacity.json">JSON</a></p>
{{range .Warnings}}<p class="warn">⚠ {{.}}</p>{{end}}
<h2>Pools</h2><table><tr><th>pool</th><th>runners</th><th>waiting</th><th>in flight</th><th>oldest</th></tr>
{{range .Pools}}<tr{{if .NoRunner}} class="warn"{{end}}><td>{{.Pool}}</td><td>{{.Runners}}</td><td>{{.Waiting}}</td><td>{{.InFlight}}</td><td>{{age .OldestAgeS}}</td></tr>{{end}}</table>
<h2>Tenants</h2><table><tr><th>tenant</th><th>stream</th><th>waiting</th><th>in flight</th><th>oldest</th></tr>
{{range .Tenants}}<tr><td>{{.Tenant}}</td><td>{{.Stream}}</td><td>{{.Waiting}}</td><td>{{.InFlight}}</td><td>{{age .OldestAgeS}}</td></tr>{{end}}</table>
<h2>Consumers</h2><table><tr><th>stream</th><th>consumer</th><th>waiting</th><th>in flight</th><th>pull requests</th><th>oldest</th></tr>
{{range .Consumers}}<tr><td>{{.Stream}}</td><td>{{.Consumer}}</td><td>{{.Waiting}}</td><td>{{.InFlight}}</td><td>{{.Pulls}}</td><td>{{age .OldestAgeS}}</td></tr>{{end}}</table>
{{if .Partial}}<p>Tenant and pool figures count the first messages of each stream only.</p>{{end}}
</body></html>`))
