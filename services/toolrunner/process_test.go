package toolrunner

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// listeningBus is a JetStream server other processes can reach over TCP.
func listeningBus(t testing.TB) *heraldtest.Bus {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, js, 1))
	return &heraldtest.Bus{Server: srv, NC: nc, JS: js}
}

// runnerProcess starts a tool runner in a process of its own (this test
// binary re-executed) and waits until it takes work.
func runnerProcess(t testing.TB, b *heraldtest.Bus, workspace, name string, concurrency int, ackWait time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=runner",
		"TOOLRUNNER_TEST_NATS="+b.Server.ClientURL(), "TOOLRUNNER_TEST_WORKSPACE="+workspace,
		"TOOLRUNNER_TEST_NAME="+name, "TOOLRUNNER_TEST_CONCURRENCY="+strconv.Itoa(concurrency),
		"TOOLRUNNER_TEST_ACKWAIT_MS="+strconv.Itoa(int(ackWait.Milliseconds())))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "runner process %s did not start", name)
	require.Equal(t, "ready", strings.TrimSpace(line))
	return cmd
}

func TestRunnerKilledMidCallLosesNothing(t *testing.T) {
	const ackWait = time.Second
	h := newIdleHarness(t, listeningBus(t), func(c *Config) { c.AckWait = ackWait })
	victim := runnerProcess(t, h.bus, h.cfg.WorkspaceRoot, "runner-doomed", 1, ackWait)

	long := h.request("terminal", map[string]any{"command": heartbeat("beat") + "echo started > started.txt; sleep 60; echo done > finished.txt"})
	queued := h.request("write_file", map[string]any{"path": "queued.txt", "content": "written once"})
	h.publish(long, long.GetCallId())
	h.publish(queued, queued.GetCallId())
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(h.cfg.WorkspaceRoot, "started.txt"))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
	_ = victim.Wait()
	h.startRunner("runner-survivor", h.cfg)

	res := h.result(long, 15*time.Second)
	require.Equal(t, "unknown_outcome", res.GetStatus())
	require.Equal(t, "runner-survivor", res.GetRunner())
	require.Contains(t, res.GetContent(), "runner-doomed")
	require.Contains(t, res.GetContent(), "check before re-running")

	res = h.result(queued, 15*time.Second)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Equal(t, "written once", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "queued.txt")))))

	// The command died with its runner instead of running on unowned.
	requireHeartbeatStops(t, filepath.Join(h.cfg.WorkspaceRoot, "beat"), "the command's background child outlived its runner")
	require.NoFileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "finished.txt"))
}
