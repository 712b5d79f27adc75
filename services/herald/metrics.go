package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/heraldrun/herald/pkg/httpguard"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/rs/zerolog"
)

// serveMetrics serves this process's Prometheus metrics on addr's /metrics
// (herald serve --metrics). Like the dashboard of herald up, it answers
// requests for loopback names, for hosts (dashboard.allowed_hosts) and for
// the address it listens on, and refuses any other Host with 403 (a web
// page rebinding its own name to this address). It returns what stops the
// server.
func serveMetrics(addr string, hosts []string, log zerolog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.Handler())
	guarded := httpguard.Hosts(mux, append(httpguard.ListenHosts(addr), hosts...)...)
	srv := &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("address", "http://"+ln.Addr().String()+"/metrics").Msg("metrics serving")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
