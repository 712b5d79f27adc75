package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/heraldrun/herald/services/herald/internal/app"
)

func cmdServe(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("serve", cio.err)
	var c common
	c.register(fs)
	concurrency := concurrencyFlag(fs)
	pool := fs.String("pool", "", "tool-runner pool: take only calls of tasks that name this pool")
	instance := fs.String("name", "", "instance name shown in results and tool events (default host-pid)")
	apiListen := fs.String("listen", "127.0.0.1:8080", "address the api service serves HTTP on (herald serve api)")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics on this address's /metrics (e.g. 127.0.0.1:9464)")
	drainFor := drainFlag(fs)
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(names) == 0 {
		fmt.Fprintln(cio.err, "herald serve: name at least one service: loop gateway toolrunner compressor memory accounting api")
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald serve:", err)
		return exitUsage
	}
	log := c.logger(cio.err, "info")
	stops := watchStops()
	a, err := app.Start(ctx, app.Options{Config: cfg, Services: names, Log: log, Instance: *instance,
		Concurrency: *concurrency, Pool: *pool, ConnectTimeout: 30 * time.Second, SizeProcessors: true, APIListen: *apiListen})
	if err != nil {
		fmt.Fprintln(cio.err, "herald serve:", err)
		if errors.Is(err, app.ErrUnknownService) {
			return exitUsage
		}
		return exitFail
	}
	stopMetrics, err := serveMetrics(*metricsAddr, cfg.Dashboard.AllowedHosts, log)
	if err != nil {
		a.Shutdown(context.Background())
		fmt.Fprintln(cio.err, "herald serve:", err)
		return exitFail
	}
	defer stopMetrics()
	log.Info().Strs("services", names).Str("nats", app.RedactURL(cfg.NATSURL)).Msg("serving")
	<-ctx.Done()
	sctx, done := stops.drain(cio.err, "herald serve", *drainFor)
	defer done()
	a.Shutdown(sctx)
	return exitOK
}

// concurrencyFlag is --concurrency of `herald serve` and `herald up`: 0
// leaves each service its default; a negative count fails the parse.
func concurrencyFlag(fs *flag.FlagSet) *int {
	var n callCount
	fs.Var(&n, "concurrency", "`calls` each service of this process works on at once (default: tool runner the number of CPUs, and four times that for read_file and search_files; gateway 2048, loop 64)")
	return (*int)(&n)
}

// callCount is a number of calls, never negative.
type callCount int

func (n *callCount) String() string { return strconv.Itoa(int(*n)) }

func (n *callCount) Set(s string) error {
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a number of calls", s)
	case v < 0:
		return errors.New("--concurrency must be a positive number of calls, or 0 for each service's default")
	}
	*n = callCount(v)
	return nil
}
