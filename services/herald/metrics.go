package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/rs/zerolog"
)

// serveMetrics serves this process's Prometheus metrics on addr's /metrics
// (herald serve --metrics). It returns what stops the server.
func serveMetrics(addr string, log zerolog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("address", "http://"+ln.Addr().String()+"/metrics").Msg("metrics serving")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
