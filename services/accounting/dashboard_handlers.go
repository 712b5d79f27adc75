package accounting

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"
)

// pageData is what a dashboard page template receives.
type pageData struct {
	template string
	Title    string
	Query    overviewQuery
	Ranges   []string
	Overview Overview
	Chart    template.HTML
	Session  SessionDetail
	Trace    SessionTrace
	// Back keeps the filters when leaving a session page.
	Back string
}

var dashboardRanges = []string{"1h", "24h", "7d", "30d", "all"}

func overviewQueryFrom(r *http.Request) (overviewQuery, error) {
	name, since, err := parseRange(r.URL.Query().Get("range"))
	if err != nil {
		return overviewQuery{}, err
	}
	q := overviewQuery{Tenant: r.URL.Query().Get("tenant"), Range: name, Since: since}
	if m := r.URL.Query().Get("month"); m != "" {
		if _, _, err := MonthRange(m); err != nil {
			return overviewQuery{}, err
		}
		q.Month, q.Range, q.Since = m, "all", 0
	}
	return q, nil
}

func (d *Dashboard) overviewAPI(ctx context.Context, st *store, r *http.Request) (any, error) {
	q, err := overviewQueryFrom(r)
	if err != nil {
		return nil, err
	}
	return st.overview(ctx, q, d.now())
}

func (d *Dashboard) sessionAPI(ctx context.Context, st *store, r *http.Request) (any, error) {
	return st.sessionDetail(ctx, r.PathValue("id"))
}

func (d *Dashboard) costAPI(ctx context.Context, st *store, r *http.Request) (any, error) {
	v := r.URL.Query()
	q := CostQuery{By: v.Get("by"), Tenant: v.Get("tenant"), Session: v.Get("session"), Month: v.Get("month")}
	if s := v.Get("since"); s != "" {
		_, since, err := parseRange(s)
		if err != nil {
			return nil, err
		}
		q.Since = since
	}
	if err := q.validate(); err != nil {
		return nil, err
	}
	return st.queryCost(ctx, q, d.now())
}

func (d *Dashboard) overviewPage(ctx context.Context, st *store, r *http.Request) (any, error) {
	q, err := overviewQueryFrom(r)
	if err != nil {
		return nil, err
	}
	ov, err := st.overview(ctx, q, d.now())
	if err != nil {
		return nil, err
	}
	return pageData{template: "overview", Title: "Herald costs", Query: q, Ranges: dashboardRanges,
		Overview: ov, Chart: spendChart(ov.Spend)}, nil
}

func (d *Dashboard) sessionPage(ctx context.Context, st *store, r *http.Request) (any, error) {
	det, err := st.sessionDetail(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	back := "../"
	if q := r.URL.Query(); len(q) > 0 {
		q.Del("token")
		back += "?" + q.Encode()
	}
	return pageData{template: "session", Title: "Session " + det.SessionID, Session: det, Back: back}, nil
}

func parsePages() *template.Template {
	funcs := template.FuncMap{
		"usd":     formatUSD,
		"pct":     func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"ms":      func(f float64) string { return fmt.Sprintf("%.0f ms", f) },
		"time":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
		"pathseg": url.PathEscape,
		"approx":  approx,
		"runtime": runTime,
		"dict":    dict,
		"mean": func(sum, n uint64) string {
			if n == 0 {
				return "–"
			}
			return fmt.Sprintf("%.0f ms", float64(sum)/float64(n))
		},
		"share": func(part, whole uint64) string {
			if whole == 0 {
				return "0"
			}
			return fmt.Sprintf("%.1f", 100*float64(part)/float64(whole))
		},
	}
	return template.Must(template.New("web").Funcs(funcs).ParseFS(webFiles, "web/*.html"))
}
