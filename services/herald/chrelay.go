package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/heraldrun/herald/services/accounting"
	"github.com/rs/zerolog"
)

// chRelay stands between herald up and a private ClickHouse another process
// started: that server stops with its starter (a herald run or chat), so up
// talks to a fixed local address that follows the server, starting it again
// (and then owning it) when it is gone. The ClickHouse client of up's
// accounting and dashboard reconnects through the relay; rows it could not
// store meanwhile are retried from the USAGE stream.
type chRelay struct {
	ln      net.Listener
	dataDir string
	log     zerolog.Logger

	mu     sync.Mutex
	target string                      // host:port of the server now
	owned  *accounting.LocalClickHouse // the server up started, if any
	closed bool
}

// startCHRelay listens on a loopback port and forwards to the server at dsn.
func startCHRelay(dsn, dataDir string, log zerolog.Logger) (*chRelay, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ClickHouse relay: %w", err)
	}
	r := &chRelay{ln: ln, dataDir: dataDir, log: log.With().Str("component", "clickhouse-relay").Logger(), target: u.Host}
	go r.serve()
	return r, nil
}

// DSN is dsn with the relay's address in place of the server's.
func (r *chRelay) DSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Host = r.ln.Addr().String()
	return u.String()
}

func (r *chRelay) serve() {
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			return
		}
		go r.forward(conn)
	}
}

func (r *chRelay) forward(client net.Conn) {
	defer client.Close()
	server, err := r.dial()
	if err != nil {
		r.log.Warn().Err(err).Msg("no private ClickHouse to forward to: usage waits in the USAGE stream")
		return
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done // either side closing ends both
	if !chAnswers("tcp://" + server.RemoteAddr().String()) {
		go r.recover() // at once, not at the next connection: a herald cost meanwhile would start one of its own
	}
}

// recover starts the server again after it stopped.
func (r *chRelay) recover() {
	if conn, err := r.dial(); err == nil {
		_ = conn.Close()
	}
}

// dial connects to the server, first finding or starting it again when the
// one it knew is gone.
func (r *chRelay) dial() (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, net.ErrClosed
	}
	if conn, err := net.Dial("tcp", r.target); err == nil {
		return conn, nil
	}
	// The old server may hold its folder for a moment after it stops
	// answering, and another process may be starting it too.
	var err error
	for deadline := time.Now().Add(restartWait); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err = r.restart(); err == nil {
			return net.Dial("tcp", r.target)
		}
	}
	return nil, err
}

// restartWait bounds how long the relay tries to start the server again.
const restartWait = 15 * time.Second

// restart points the relay at the user's private ClickHouse when another
// process started it again, else starts it from its folder.
func (r *chRelay) restart() error {
	rec := readCHRecord()
	if rec.DSN != "" && chAnswers(rec.DSN) {
		u, err := url.Parse(rec.DSN)
		if err == nil {
			r.target = u.Host
		}
		return err
	}
	dir := filepath.Join(r.dataDir, "clickhouse")
	if dirExists(rec.Dir) {
		dir = rec.Dir
	}
	l, err := accounting.StartLocalClickHouse(context.Background(), dir, r.log)
	if err != nil {
		return err
	}
	writeCHRecord(chRecord{DSN: l.DSN(), Dir: dir})
	r.log.Warn().Str("clickhouse", l.Addr()).Msg("the private ClickHouse stopped with the process that started it: herald up started it again")
	r.owned, r.target = l, l.Addr()
	return nil
}

// close stops relaying, and the server the relay started.
func (r *chRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.owned != nil {
		r.owned.Stop()
	}
}
