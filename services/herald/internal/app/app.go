// Package app composes Herald's services in one process: over an embedded
// JetStream server (herald run, up, demo) or against a remote NATS (serve).
// It owns wiring and lifecycle only; every behaviour lives in the services.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/pkg/telemetry/otlp"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/api"
	"github.com/heraldrun/herald/services/compressor"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/heraldrun/herald/services/herald/internal/procs"
	"github.com/heraldrun/herald/services/loop"
	"github.com/heraldrun/herald/services/memory"
	"github.com/heraldrun/herald/services/toolrunner"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Options say which services to run and where the bus is.
type Options struct {
	Config   config.Config
	Services []string // nil: all
	// Embedded runs a NATS server in the process with its store here;
	// empty means connect to Config.NATSURL.
	StoreDir string
	// Listen is the embedded server's client address ("" = in-process only).
	Listen string
	// NATSConfigFile is an optional nats-server config for the embedded server.
	NATSConfigFile string
	// NATSMaxPayload caps one message on the embedded server (0: 8 MiB).
	NATSMaxPayload int32
	// MemoryProvider is the one optional external memory provider.
	MemoryProvider memory.Provider
	Log            zerolog.Logger
	Instance       string
	// Concurrency caps the calls each service of this process works on at
	// once (0: each service's default); Pool names a tool runner's pool.
	Concurrency int
	Pool        string
	// ConnectTimeout bounds waiting for a remote NATS (serve).
	ConnectTimeout time.Duration
	// SizeProcessors: once started, fit GOMAXPROCS to the load (internal/
	// procs). Only after start-up, so that what sizes itself by GOMAXPROCS
	// when it starts (the embedded server's API workers) sees the runtime's
	// own choice; the binary's commands set it, tests that run the
	// services inside the test process do not.
	SizeProcessors bool
	// API also runs the api service (herald up); "api" among Services does
	// too. APIListen is where it serves ("": the caller mounts API.Handler).
	API       bool
	APIListen string
}

// App is a running composition.
type App struct {
	Server   *embedded.Server
	NC       *nats.Conn
	JS       jetstream.JetStream
	services []service.Service
	// conns are the services' own connections (serviceDeps).
	conns []*nats.Conn
	log   zerolog.Logger
	// stopTraces flushes and stops the span exporter (a no-op when off).
	stopTraces func(context.Context) error
	// API is the api service when this composition runs it.
	API *api.Service
}

// ErrUnknownService names a service that does not exist.
var ErrUnknownService = errors.New("unknown service")

// Start starts the bus (or connects to it), declares the streams and starts
// the services in dependency order.
func Start(ctx context.Context, o Options) (*App, error) {
	names := o.Services
	if len(names) == 0 {
		names = service.Names
	}
	for _, n := range names {
		if !slices.Contains(service.Names, n) && n != api.Name {
			return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownService, n, service.Names)
		}
	}
	stopTraces, err := otlp.Start(ctx, traceServiceName(names), o.Log)
	if err != nil {
		return nil, err
	}
	a := &App{log: o.Log, stopTraces: stopTraces}
	if err := a.connect(ctx, o); err != nil {
		a.Shutdown(context.Background())
		return nil, err
	}
	if err := bus.WaitReady(ctx, a.JS, o.Config.Replicas, o.Config.NATSDeclare != "check", o.Log); err != nil {
		a.Shutdown(context.Background())
		return nil, fmt.Errorf("declare streams: %w", err)
	}
	deps := service.Deps{NC: a.NC, JS: a.JS, Log: o.Log, Config: o.Config, Instance: instanceName(o.Instance)}
	for _, n := range service.Names { // dependency order, whatever order was asked
		if !slices.Contains(names, n) {
			continue
		}
		sdeps, err := a.serviceDeps(ctx, o, deps, n, len(names) > 1)
		if err != nil {
			a.Shutdown(context.Background())
			return nil, fmt.Errorf("start %s: %w", n, err)
		}
		svc, err := build(n, o, sdeps)
		if err == nil {
			err = svc.Start(ctx)
		}
		if err != nil {
			a.Shutdown(context.Background())
			return nil, fmt.Errorf("start %s: %w", n, err)
		}
		a.services = append(a.services, svc)
	}
	if o.API || slices.Contains(names, api.Name) {
		if err := a.startAPI(ctx, o, deps); err != nil {
			a.Shutdown(context.Background())
			return nil, err
		}
	}
	if o.SizeProcessors {
		procs.Start(ctx)
	}
	return a, nil
}

// serviceDeps gives a service of a process that runs several its own
// connection to the bus. A connection is one ordered stream each way: the
// server reads a client's messages one after another, and the client hands
// out its deliveries one after another. On one connection shared by every
// service, a tenant's model request waited behind the loop's publishing of
// another tenant's flood, and a thousand sessions starting at once were
// started at the pace of that one line (docs/BENCHMARKS.md, "Fair share").
// Messages one service sends in order still travel in order: each service
// sends on its own connection only.
func (a *App) serviceDeps(ctx context.Context, o Options, deps service.Deps, name string, several bool) (service.Deps, error) {
	if !several {
		return deps, nil
	}
	var nc *nats.Conn
	var err error
	if a.Server != nil {
		nc, err = a.Server.Connect("herald-"+name, append(credentials(o.Config.NATSURL), InboxOption(o.Config))...)
	} else {
		nc, err = Dial(ctx, o.Config.NATSURL, "herald-"+instanceName(o.Instance)+"-"+name, o.ConnectTimeout, InboxOption(o.Config))
	}
	if err != nil {
		return deps, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return deps, err
	}
	a.conns = append(a.conns, nc)
	deps.NC, deps.JS = nc, js
	return deps, nil
}

// startAPI starts the api service, last: it only submits work to the others.
func (a *App) startAPI(ctx context.Context, o Options, deps service.Deps) error {
	cfg := api.ConfigFrom(o.Config)
	cfg.Listen = o.APIListen
	svc, err := api.New(cfg, deps)
	if err == nil {
		err = svc.Start(ctx)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", api.Name, err)
	}
	a.services = append(a.services, svc)
	a.API = svc
	return nil
}

func (a *App) connect(ctx context.Context, o Options) error {
	var err error
	if o.StoreDir != "" {
		a.Server, err = embedded.Start(embedded.Options{StoreDir: o.StoreDir, Listen: o.Listen,
			Log: o.Log, ConfigFile: o.NATSConfigFile, MaxPayload: o.NATSMaxPayload})
		if err != nil {
			return err
		}
		a.NC, err = a.Server.Connect("herald", append(credentials(o.Config.NATSURL), InboxOption(o.Config))...)
	} else {
		a.NC, err = Dial(ctx, o.Config.NATSURL, "herald-"+instanceName(o.Instance), o.ConnectTimeout, InboxOption(o.Config))
	}
	if err != nil {
		return err
	}
	a.JS, err = jetstream.New(a.NC)
	return err
}

// Dial connects to a NATS server, retrying until timeout (0: one try).
func Dial(ctx context.Context, url, name string, timeout time.Duration, opts ...nats.Option) (*nats.Conn, error) {
	deadline := time.Now().Add(timeout)
	opts = append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.Timeout(2 * time.Second)}, opts...)
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil {
			return nc, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to NATS at %s: %w", RedactURL(url), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// RedactURL hides the password of a NATS URL (nats://user:pass@host), so
// it can be logged and shown in errors.
func RedactURL(raw string) string {
	var out []string
	for _, part := range strings.Split(raw, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.User == nil {
			out = append(out, part)
			continue
		}
		out = append(out, u.Redacted())
	}
	return strings.Join(out, ",")
}

// InboxOption puts this process's replies (request answers, publish acks,
// pulled messages) under cfg.NATSInboxPrefix, or _INBOX_<user> when the NATS
// URL names a user: a NATS config can then let each user subscribe to its
// own replies only (deploy/nats/herald.conf), where the shared _INBOX.>
// would let any user read every reply in the account.
func InboxOption(cfg config.Config) nats.Option {
	prefix := cfg.NATSInboxPrefix
	if user := urlUser(cfg.NATSURL); prefix == "" && user != nil && validToken(user.Username()) {
		prefix = "_INBOX_" + user.Username()
	}
	if prefix == "" {
		prefix = "_INBOX"
	}
	return nats.CustomInboxPrefix(prefix)
}

// validToken says whether s can be one token of a subject as it is.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// credentials carries the user and password of a NATS URL to an in-process
// connection, for an embedded server whose configuration requires them.
func credentials(raw string) []nats.Option {
	user := urlUser(raw)
	if user == nil {
		return nil
	}
	pass, _ := user.Password()
	return []nats.Option{nats.UserInfo(user.Username(), pass)}
}

// urlUser is the user of a NATS URL list's first server, or nil.
func urlUser(raw string) *url.Userinfo {
	u, err := url.Parse(strings.Split(raw, ",")[0])
	if err != nil {
		return nil
	}
	return u.User
}

func build(name string, o Options, deps service.Deps) (service.Service, error) {
	c := o.Config
	switch name {
	case "accounting":
		return accounting.New(accounting.ConfigFrom(c), deps)
	case "memory":
		svc, err := memory.New(memory.ConfigFrom(c), deps)
		if err == nil && o.MemoryProvider != nil {
			svc.SetProvider(o.MemoryProvider)
		}
		return svc, err
	case "toolrunner":
		cfg := toolrunner.ConfigFrom(c)
		if o.Concurrency > 0 {
			cfg.Concurrency = o.Concurrency
		}
		if o.Pool != "" {
			cfg.Pool = o.Pool
		}
		return toolrunner.New(cfg, deps)
	case "compressor":
		return compressor.New(compressor.ConfigFrom(c), deps)
	case "gateway":
		cfg := gateway.ConfigFrom(c)
		if o.Concurrency > 0 {
			cfg.Concurrency = o.Concurrency
		}
		return gateway.New(cfg, deps)
	case "loop":
		cfg := loop.ConfigFrom(c)
		if o.Concurrency > 0 {
			cfg.Concurrency = o.Concurrency
		}
		return loop.New(cfg, deps)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownService, name)
}

// Shutdown stops the services in reverse order, then the connection and the
// embedded server. Safe to call twice.
func (a *App) Shutdown(ctx context.Context) {
	for i := len(a.services) - 1; i >= 0; i-- {
		if err := a.services[i].Shutdown(ctx); err != nil {
			a.log.Warn().Err(err).Str("service", a.services[i].Name()).Msg("service shutdown incomplete")
		}
	}
	a.services = nil
	for _, nc := range a.conns {
		_ = nc.Flush()
		nc.Close()
	}
	a.conns = nil
	if a.NC != nil {
		_ = a.NC.Flush()
		a.NC.Close()
		a.NC = nil
	}
	if a.Server != nil {
		a.Server.Shutdown()
		a.Server = nil
	}
	a.flushTraces(ctx)
}

func instanceName(s string) string {
	if s != "" {
		return s
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
