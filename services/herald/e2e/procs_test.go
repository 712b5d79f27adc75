package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// cluster is a NATS server in the test process and Herald services as real
// `herald serve` processes that tests can kill -9 and restart.
type cluster struct {
	t     *testing.T
	store string
	srv   *embedded.Server
	URL   string
	NC    *nats.Conn
	JS    jetstream.JetStream
	env   map[string]string
	mu    sync.Mutex
	procs []*proc
}

type proc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
}

func startCluster(t *testing.T, env map[string]string) *cluster {
	t.Helper()
	store := t.TempDir()
	srv, err := embedded.Start(embedded.Options{StoreDir: store, Listen: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Log: heraldtestNop()})
	require.NoError(t, err)
	// Cleanups run last-first: the server (whichever restartServer left
	// running) stops after the processes, so they shut down cleanly.
	c := &cluster{t: t, store: store, srv: srv, URL: srv.ClientURL(), env: map[string]string{}}
	t.Cleanup(func() { c.srv.Shutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, js, 1))
	c.NC, c.JS = nc, js
	for k, v := range env {
		c.env[k] = v
	}
	c.env["HERALD_NATS_URL"] = c.URL
	t.Cleanup(c.stopAll)
	return c
}

// restartServer stops the NATS server and starts it again on the same
// address and file store, as an operator's restart would.
func (c *cluster) restartServer() {
	c.t.Helper()
	c.srv.Shutdown()
	addr := strings.TrimPrefix(c.URL, "nats://")
	srv, err := embedded.Start(embedded.Options{StoreDir: c.store, Listen: addr, Log: heraldtestNop()})
	require.NoError(c.t, err)
	c.srv = srv
}

// serve starts `herald serve names...` and returns the process.
func (c *cluster) serve(names ...string) *proc {
	c.t.Helper()
	cmd := exec.Command(heraldBin, append([]string{"serve"}, names...)...)
	cmd.Dir = c.t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "HERALD_LOG_LEVEL=warn"}
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{cmd: cmd, out: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(c.t, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.exited) }()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// kill9 kills the process without letting it clean up.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if c.t.Failed() {
			c.t.Logf("output of %v:\n%s", p.cmd.Args, p.out.String())
		}
	}
}

// dlqCount counts the dead letters of one stream.
func dlqCount(t *testing.T, js jetstream.JetStream, stream string) int {
	return len(heraldtest.DeadLetters(t, js, stream))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}
