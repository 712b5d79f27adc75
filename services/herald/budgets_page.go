package main

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/nats-io/nats.go/jetstream"
)

// recentBudgetAlerts is how many of the latest alerts the dashboard lists.
const recentBudgetAlerts = 50

// budgetsView is what the dashboard's budgets page shows.
type budgetsView struct {
	Windows []gateway.BudgetStatus `json:"windows"`
	Alerts  []proto.BudgetAlert    `json:"alerts"`
}

// budgetsPage mounts the dashboard's budgets page (/budgets) and its JSON
// (/api/budgets): every window against its limit, and the latest alerts.
func budgetsPage(js jetstream.JetStream, b config.Budgets) func(mount func(string, http.Handler)) {
	return func(mount func(string, http.Handler)) {
		read := func(r *http.Request) (budgetsView, error) {
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			defer cancel()
			v := budgetsView{Windows: []gateway.BudgetStatus{}, Alerts: []proto.BudgetAlert{}}
			if b.Configured() {
				w, err := gateway.BudgetReport(ctx, js, b, time.Now())
				if err != nil {
					return v, err
				}
				v.Windows = w
			}
			alerts, err := latestBudgetAlerts(ctx, js, recentBudgetAlerts)
			v.Alerts = alerts
			return v, err
		}
		mount("GET /api/budgets", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, err := read(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}))
		mount("GET /budgets", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, err := read(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = budgetsTemplate.Execute(w, v)
		}))
	}
}

// latestBudgetAlerts reads up to n of the newest alerts, newest first.
func latestBudgetAlerts(ctx context.Context, js jetstream.JetStream, n int) ([]proto.BudgetAlert, error) {
	out := []proto.BudgetAlert{}
	s, err := js.Stream(ctx, bus.StreamAlerts)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return out, err
	}
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && len(out) < n; seq-- {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		var a proto.BudgetAlert
		if m.Subject == bus.BudgetAlertsSubject && json.Unmarshal(m.Data, &a) == nil {
			out = append(out, a)
		}
	}
	return out, nil
}

var budgetsTemplate = template.Must(template.New("budgets").Funcs(template.FuncMap{
	"bar": func(p float64) float64 { return min(p, 100) },
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Herald budgets</title>
<style>
body{font:14px system-ui,sans-serif;margin:0;color:#222}header{background:#1f2d3d;color:#fff;padding:12px 20px;display:flex;gap:16px;align-items:center}
header a{color:#fff}h1{font-size:18px;margin:0}main{padding:16px 20px}table{border-collapse:collapse;width:100%;margin-bottom:24px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #eee}td.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{background:#eee;width:160px;height:10px;border-radius:5px;overflow:hidden}.bar i{display:block;height:100%;background:#3a7}
.bar i.hot{background:#d93}.bar i.over{background:#c33}
</style></head><body>
<header><h1>Herald budgets</h1><nav><a href="./">overview</a></nav></header><main>
<h2>Windows</h2>
{{if .Windows}}<table id="budget-windows"><tr><th>scope</th><th>id</th><th>window</th><th>period</th><th>spent</th><th>held</th><th>limit</th><th>used</th><th></th><th>alerted</th></tr>
{{range .Windows}}<tr><td>{{.Scope}}</td><td>{{.ID}}{{if .Default}} (default_tenant){{end}}</td><td>{{.Window}}</td><td>{{.Period}}</td>
<td class="num">${{printf "%.4f" .SpentUSD}}</td><td class="num">${{printf "%.4f" .HeldUSD}}</td><td class="num">${{printf "%.4f" .LimitUSD}}</td>
<td class="num">{{printf "%.1f" .Percent}}%</td><td><div class="bar"><i class="{{if ge .Percent 100.0}}over{{else if ge .Percent 75.0}}hot{{end}}" style="width:{{bar .Percent}}%"></i></div></td>
<td>{{range .Alerted}}{{.}}% {{else}}-{{end}}</td></tr>
{{end}}</table>{{else}}<p>No budgets are set (<code>budgets:</code> in herald.yaml).</p>{{end}}
<h2>Latest alerts</h2>
{{if .Alerts}}<table id="budget-alerts"><tr><th>time</th><th>tenant</th><th>scope</th><th>id</th><th>window</th><th>period</th><th>threshold</th><th>spent</th><th>limit</th><th></th></tr>
{{range .Alerts}}<tr><td>{{.TS}}</td><td>{{.Tenant}}</td><td>{{.Scope}}</td><td>{{.ID}}</td><td>{{.Window}}</td><td>{{.Period}}</td>
<td class="num">{{.Threshold}}%</td><td class="num">${{printf "%.4f" .Spent}}</td><td class="num">${{printf "%.4f" .Limit}}</td><td>{{if .Refused}}a call was refused{{end}}</td></tr>
{{end}}</table>{{else}}<p>No budget alerts yet.</p>{{end}}
</main></body></html>
`))
