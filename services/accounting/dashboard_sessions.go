package accounting

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// sessionsListLimit bounds the sessions page (most expensive first).
const sessionsListLimit = 500

// sessionsPage lists the sessions of a range, most expensive first, those
// whose id holds ?q= (case-insensitive) when it is given.
func (d *Dashboard) sessionsPage(ctx context.Context, st *store, r *http.Request) (any, error) {
	q, err := overviewQueryFrom(r)
	if err != nil {
		return nil, err
	}
	q.Search = strings.TrimSpace(r.URL.Query().Get("q"))
	plan := planUsage(usageFilter{Since: q.Since, Tenant: q.Tenant}, d.now())
	rows, err := st.groupUsage(ctx, plan, keyFor("session"), 0)
	if err == nil {
		err = st.addUnpriced(ctx, plan, keyFor("session"), rows)
	}
	if err != nil {
		return nil, err
	}
	var found []CostRow
	for _, row := range rows {
		if q.Search == "" || strings.Contains(strings.ToLower(row.Key), strings.ToLower(q.Search)) {
			found = append(found, row)
		}
	}
	if len(found) > sessionsListLimit {
		found = found[:sessionsListLimit]
	}
	return pageData{template: "sessions", Title: "Herald sessions", Query: q, Ranges: dashboardRanges,
		Overview: Overview{Sessions: found, Total: totalOf(found)}}, nil
}

// Health is what /healthz answers.
type Health struct {
	Status     string `json:"status"`     // ok: the dashboard serves
	ClickHouse string `json:"clickhouse"` // ok, unreachable or not configured
}

func (d *Dashboard) healthz(w http.ResponseWriter, _ *http.Request) {
	h := Health{Status: "ok", ClickHouse: "not configured"}
	if d.dsn != "" {
		h.ClickHouse = "unreachable"
		if u, err := url.Parse(d.dsn); err == nil && u.Host != "" {
			if conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second); err == nil {
				_ = conn.Close()
				h.ClickHouse = "ok"
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(h)
}
