// Package embedded runs a NATS server with JetStream inside the process, for
// `herald run`, `herald up`, `herald demo` and tests. It is the only package
// of pkg that imports nats-server.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Options configure an embedded server.
type Options struct {
	// StoreDir holds JetStream's file store.
	StoreDir string
	// Listen is host:port to accept clients on; empty means no socket at all:
	// clients connect in-process only.
	Listen string
	// MaxPayload in bytes; 0 means 8 MiB.
	MaxPayload int32
	Log        zerolog.Logger
	// ConfigFile, when set, is loaded as a nats-server configuration file
	// (accounts, users, permissions); Listen and StoreDir still apply.
	ConfigFile string
}

// Server is a running embedded NATS server.
type Server struct {
	srv *server.Server
}

// ErrNotReady is returned when the server does not accept clients in time.
var ErrNotReady = errors.New("embedded nats server not ready")

// ErrListen is returned when the server cannot listen on its address (in
// use by another process, or not this machine's).
var ErrListen = errors.New("nats server cannot listen")

// readyWait bounds how long Start waits for the server to accept clients.
const readyWait = 10 * time.Second

// Start starts the server and waits until it accepts clients.
func Start(o Options) (*Server, error) {
	opts := &server.Options{}
	if o.ConfigFile != "" {
		fo, err := server.ProcessConfigFile(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("nats config %s: %w", o.ConfigFile, err)
		}
		opts = fo
	}
	opts.JetStream = true
	opts.StoreDir = o.StoreDir
	opts.NoSigs = true
	opts.MaxPayload = o.MaxPayload
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 8 << 20
	}
	if o.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats listen address %q: %w", o.Listen, err)
		}
		opts.Host = host
		if opts.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("nats listen port %q: %w", port, err)
		}
		if opts.Port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	logs := &logAdapter{log: o.Log.With().Str("component", "nats-server").Logger(), fatal: make(chan string, 1)}
	srv.SetLoggerV2(logs, false, false, false)
	go srv.Start()
	if err := waitReady(srv, logs.fatal); err != nil {
		srv.Shutdown()
		return nil, err
	}
	return &Server{srv: srv}, nil
}

// waitReady waits until srv accepts clients; a fatal error it logs (such as
// its listener failing to bind) ends the wait at once.
func waitReady(srv *server.Server, fatal <-chan string) error {
	deadline := time.Now().Add(readyWait)
	for time.Now().Before(deadline) {
		if srv.ReadyForConnections(50 * time.Millisecond) {
			return nil
		}
		select {
		case msg := <-fatal:
			if strings.HasPrefix(msg, "Error listening") {
				return fmt.Errorf("%w: %s", ErrListen, msg)
			}
			return fmt.Errorf("nats server: %s", msg)
		default:
		}
	}
	return ErrNotReady
}

// ClientURL is the URL clients use; empty for an in-process-only server.
func (s *Server) ClientURL() string {
	if s.srv.Addr() == nil {
		return ""
	}
	return s.srv.ClientURL()
}

// Connect opens a client connection to the server (in-process when it has no socket).
func (s *Server) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), nats.InProcessServer(s.srv), nats.MaxReconnects(-1)}, opts...)
	return nats.Connect("", opts...)
}

// Shutdown stops the server and waits for it; safe to call twice.
func (s *Server) Shutdown() {
	if s == nil || s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// NATS returns the underlying server, for tests that need to inspect it.
func (s *Server) NATS() *server.Server { return s.srv }

// logAdapter routes the server's logs into zerolog; its fatal errors are
// also sent on fatal, which Start waits on (the first one is kept).
type logAdapter struct {
	log   zerolog.Logger
	fatal chan string
}

func (l *logAdapter) Noticef(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l *logAdapter) Warnf(format string, v ...any)   { l.log.Warn().Msgf(format, v...) }

func (l *logAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error().Msg(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}

func (l *logAdapter) Errorf(format string, v ...any) { l.log.Error().Msgf(format, v...) }
func (l *logAdapter) Debugf(format string, v ...any) { l.log.Trace().Msgf(format, v...) }
func (l *logAdapter) Tracef(format string, v ...any) { l.log.Trace().Msgf(format, v...) }
