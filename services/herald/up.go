package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/heraldrun/herald/pkg/httpguard"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/rs/zerolog"
)

// dsnFile records the DSN of the private ClickHouse `herald up` started, so
// `herald cost` and `herald sessions` find it without configuration.
const dsnFile = "clickhouse.dsn"

func cmdUp(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("up", cio.err)
	var c common
	c.register(fs)
	listen := fs.String("nats-listen", defaultListen(), "address the embedded NATS server listens on (default: the host:port of HERALD_NATS_URL, else 127.0.0.1:4222)")
	dataDir := fs.String("data-dir", "", "where streams, workspace and ClickHouse data live (default ./.herald or HERALD_DATA_DIR)")
	httpAddr := fs.String("http", envOr("HERALD_HTTP_ADDR", "127.0.0.1:8080"), "dashboard address (empty to disable; default HERALD_HTTP_ADDR, else 127.0.0.1:8080)")
	natsConfig := fs.String("nats-config", "", "nats-server configuration file (accounts, users, permissions)")
	concurrency := concurrencyFlag(fs)
	drainFor := drainFlag(fs)
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald up:", err)
		return exitUsage
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
		if err := absPaths(&cfg); err != nil {
			fmt.Fprintln(cio.err, "herald up: --data-dir:", err)
			return exitUsage
		}
	}
	log := c.logger(cio.err, "info")
	stops := watchStops()
	lock, err := lockDataDir(cfg.DataDir, lockHolder{Workspace: cfg.WorkspaceRoot()})
	if err != nil {
		fmt.Fprintln(cio.err, "herald up:", err)
		return exitFail
	}
	defer lock.release()
	if err := checkUpAddrs(*listen, *httpAddr); err != nil {
		fmt.Fprintln(cio.err, "herald up:", err)
		return exitFail
	}
	ch, err := privateClickHouse(ctx, &cfg.ClickHouseDSN, cfg.DataDir, log)
	if err != nil {
		fmt.Fprintln(cio.err, "herald up:", err)
		return exitFail
	}
	defer ch.stop()
	a, err := app.Start(ctx, app.Options{Config: cfg, StoreDir: filepath.Join(cfg.DataDir, "nats"), Listen: *listen,
		NATSConfigFile: *natsConfig, Log: log, Instance: "up", Concurrency: *concurrency, SizeProcessors: true, API: *httpAddr != ""})
	if err != nil {
		fmt.Fprintln(cio.err, "herald up:", natsListenError(*listen, err))
		return exitFail
	}
	defer func() { a.Shutdown(context.Background()) }() // at once when returning early; drained below
	if err := lock.setNATS(a.Server.ClientURL()); err != nil {
		fmt.Fprintln(cio.err, "herald up:", err)
		return exitFail
	}
	capacity := capacityPage(a.JS, capacityOptions{defaultTenant: cfg.Tenant, scanLimit: 5000,
		warnAfter: poolWarningAfter(cfg.Tools.PoolWarningAfter), pingWait: 300 * time.Millisecond})
	stopHTTP, err := serveDashboard(*httpAddr, cfg.ClickHouseDSN, cfg.DashboardToken, cfg.Dashboard.AllowedHosts, app.Transcripts(a.JS), a.API, log,
		budgetsPage(a.JS, cfg.Budgets), capacityMount(capacity))
	if err != nil {
		fmt.Fprintln(cio.err, "herald up:", err)
		return exitFail
	}
	defer stopHTTP()
	log.Info().Str("nats", a.Server.ClientURL()).Str("workspace", cfg.WorkspaceRoot()).
		Str("dashboard", *httpAddr).Bool("clickhouse", cfg.ClickHouseDSN != "").Msg("herald is up")
	fmt.Fprintf(cio.err, "Herald is up. NATS: %s — publish tasks on herald.tasks; their tools work in %s. Ctrl-C stops.\n",
		a.Server.ClientURL(), cfg.WorkspaceRoot())
	<-ctx.Done()
	log.Info().Msg("shutting down")
	dctx, done := stops.drain(cio.err, "herald up", *drainFor)
	defer done()
	a.Shutdown(dctx)
	return exitOK
}

// localCH is the private ClickHouse of herald up: l when up started it,
// else the relay to the one another herald process started.
type localCH struct {
	l     *accounting.LocalClickHouse
	relay *chRelay
}

func (c localCH) stop() {
	if c.l != nil {
		c.l.Stop()
	}
	if c.relay != nil {
		c.relay.close()
	}
}

// privateClickHouse starts a ClickHouse under dataDir when no DSN is set and
// clickhouse-server is installed, and records its DSN for the other commands.
func privateClickHouse(ctx context.Context, dsn *string, dataDir string, log zerolog.Logger) (localCH, error) {
	if *dsn != "" {
		return localCH{}, nil
	}
	l, err := sharedClickHouse(ctx, dsn, dataDir, log)
	if errors.Is(err, accounting.ErrNoClickHouse) {
		log.Warn().Msg("no HERALD_CLICKHOUSE_DSN and no clickhouse-server on PATH: usage events wait in the USAGE stream")
		return localCH{}, nil
	}
	if err != nil {
		return localCH{}, fmt.Errorf("private ClickHouse: %w", err)
	}
	c := localCH{l: l}
	if l == nil { // another process's: it stops with that process
		if c.relay, err = startCHRelay(*dsn, dataDir, log); err != nil {
			return localCH{}, err
		}
		*dsn = c.relay.DSN(*dsn)
	}
	_ = os.WriteFile(filepath.Join(dataDir, dsnFile), []byte(*dsn), 0o600)
	return c, nil
}

// serveDashboard serves the cost dashboard; it refuses a non-loopback
// address without a token. It answers requests for loopback names, for
// hosts (dashboard.allowed_hosts) and for the address it listens on.
func serveDashboard(addr, dsn, token string, hosts []string, transcripts accounting.Transcripts, api apiHandler, log zerolog.Logger,
	mounts ...func(mount func(string, http.Handler))) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); token == "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--http %s is not a loopback address: set dashboard_token (or HERALD_DASHBOARD_TOKEN) to expose the dashboard", addr)
	}
	handler, err := dashboardHandler(dsn, token, append(httpguard.ListenHosts(addr), hosts...), transcripts, log, mounts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	srv := &http.Server{Handler: withAPI(handler, api), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("address", "http://"+ln.Addr().String()).Msg("dashboard serving")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if c, ok := handler.(interface{ Close() }); ok {
			c.Close()
		}
	}, nil
}

// defaultListen is where `herald up` listens unless told: where
// HERALD_NATS_URL points when that is this machine's loopback, so `herald
// run` and the nats CLI of the same environment find it.
func defaultListen() string {
	u, err := url.Parse(os.Getenv("HERALD_NATS_URL"))
	if err == nil && u.Port() != "" {
		if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || ip != nil && ip.IsLoopback() {
			return net.JoinHostPort(u.Hostname(), u.Port())
		}
	}
	return "127.0.0.1:4222"
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
