package accounting

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/httpguard"
	"github.com/rs/zerolog"
)

//go:embed web/*.html
var webFiles embed.FS

// DashboardTokenCookie carries the token after it was given once as ?token=.
const DashboardTokenCookie = "herald_dashboard_token"

// Dashboard serves the cost dashboard and its JSON API over HTTP:
//
//	GET /                 spend over time by model, top sessions and tenants,
//	                      cost by purpose, provider error rates, tool latency
//	                      (?tenant=, ?range=1h|24h|7d|30d|all)
//	GET /sessions/{id}    one session's steps and costs
//	GET /sessions/{id}/trace  the session as a trace (session_trace.go)
//	GET /api/overview     the same data as JSON
//	GET /api/sessions/{id}
//	GET /api/cost         a CostReport (?by=, ?since=, ?tenant=, ?session=)
//	GET /sessions         every session of a range, searchable (?q=, ?range=, ?tenant=)
//	GET /healthz          200 and whether ClickHouse answers (no token needed)
//
// Without a token it answers loopback clients only; with one it requires it
// (Authorization: Bearer, ?token= which sets a cookie, or the cookie).
// Either way, and on every route, a request must name in its Host header a
// loopback name or one of the allowed hosts (AllowHosts): a web page that
// rebinds its own name to 127.0.0.1 gets 403 (pkg/httpguard).
type Dashboard struct {
	dsn   string
	token string
	log   zerolog.Logger
	mux   *http.ServeMux
	guard http.Handler // the Host rule around serve
	pages *template.Template
	now   func() time.Time

	mu          sync.Mutex
	store       *store
	transcripts Transcripts
}

// NewDashboard serves the dashboard over the ClickHouse at dsn.
func NewDashboard(dsn, token string, log zerolog.Logger) *Dashboard {
	d := &Dashboard{dsn: dsn, token: token, log: log.With().Str("component", "dashboard").Logger(),
		mux: http.NewServeMux(), pages: parsePages(), now: time.Now}
	d.mux.HandleFunc("GET /{$}", d.page(d.overviewPage))
	d.mux.HandleFunc("GET /sessions/{id}", d.page(d.sessionPage))
	d.mux.HandleFunc("GET /sessions", d.page(d.sessionsPage))
	d.mux.HandleFunc("GET /api/overview", d.api(d.overviewAPI))
	d.mux.HandleFunc("GET /api/sessions/{id}", d.api(d.sessionAPI))
	d.mux.HandleFunc("GET /api/cost", d.api(d.costAPI))
	d.routeTrace()
	d.AllowHosts()
	return d
}

// AllowHosts sets the names beyond loopback (dashboard.allowed_hosts) the
// dashboard answers under; call it before serving.
func (d *Dashboard) AllowHosts(hosts ...string) {
	d.guard = httpguard.Hosts(http.HandlerFunc(d.serve), hosts...)
}

// Handler is the service's dashboard, for the herald binary to mount.
func (s *Service) Handler() http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dashboard == nil {
		s.dashboard = NewDashboard(s.cfg.DSN, s.cfg.DashboardToken, s.log)
		s.dashboard.AllowHosts(s.cfg.DashboardHosts...)
	}
	return s.dashboard
}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.guard.ServeHTTP(w, r) }

// serve answers a request whose Host passed the rule.
func (d *Dashboard) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" { // for load balancers and probes: no token
		d.healthz(w, r)
		return
	}
	if !d.authorize(w, r) {
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	d.mux.ServeHTTP(w, r)
}

// authorize lets loopback clients in when there is no token, and otherwise
// only requests that carry it.
func (d *Dashboard) authorize(w http.ResponseWriter, r *http.Request) bool {
	if d.token == "" {
		if isLoopback(r.RemoteAddr) {
			return true
		}
		http.Error(w, "the dashboard answers loopback clients only; set dashboard_token (HERALD_DASHBOARD_TOKEN) to expose it", http.StatusForbidden)
		return false
	}
	given := ""
	if c, err := r.Cookie(DashboardTokenCookie); err == nil {
		given = c.Value
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		given = t
	}
	if t := r.URL.Query().Get("token"); t != "" {
		given = t
		if d.tokenMatches(t) {
			http.SetCookie(w, &http.Cookie{Name: DashboardTokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
	}
	if !d.tokenMatches(given) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
		http.Error(w, "dashboard token required", http.StatusUnauthorized)
		return false
	}
	return true
}

func (d *Dashboard) tokenMatches(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(d.token)) == 1
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// conn returns the dashboard's ClickHouse connection, opening it on first
// use and again after it failed.
func (d *Dashboard) conn(ctx context.Context) (*store, error) {
	if d.dsn == "" {
		return nil, ErrNoDSN
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.store != nil {
		return d.store, nil
	}
	st, err := openExisting(ctx, d.dsn)
	if err != nil {
		return nil, err
	}
	d.store = st
	return st, nil
}

// forget drops a connection that failed so the next request reconnects.
func (d *Dashboard) forget(err error) {
	if !errors.Is(err, ErrUnreachable) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.store != nil {
		d.store.Close()
		d.store = nil
	}
}

// Close releases the dashboard's connection.
func (d *Dashboard) Close() {
	d.forget(ErrUnreachable)
}

// api wraps a handler that returns a value to send as JSON.
func (d *Dashboard) api(f func(ctx context.Context, st *store, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		v, err := d.withStore(ctx, r, f)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(statusOf(err))
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
}

// page wraps a handler that returns a template name and its data.
func (d *Dashboard) page(f func(ctx context.Context, st *store, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		v, err := d.withStore(ctx, r, f)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err != nil {
			w.WriteHeader(statusOf(err))
			d.render(w, "error", map[string]any{"Error": err.Error(), "Status": statusOf(err)})
			return
		}
		p := v.(pageData)
		d.render(w, p.template, p)
	}
}

func (d *Dashboard) withStore(ctx context.Context, r *http.Request, f func(context.Context, *store, *http.Request) (any, error)) (any, error) {
	st, err := d.conn(ctx)
	if err != nil {
		return nil, err
	}
	v, err := f(ctx, st, r)
	d.forget(err)
	return v, err
}

func (d *Dashboard) render(w http.ResponseWriter, name string, data any) {
	if err := d.pages.ExecuteTemplate(w, name, data); err != nil {
		d.log.Warn().Err(err).Str("page", name).Msg("rendering a dashboard page failed")
	}
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadQuery):
		return http.StatusBadRequest
	case errors.Is(err, ErrNoSession):
		return http.StatusNotFound
	case errors.Is(err, ErrUnreachable), errors.Is(err, ErrNoDSN):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
