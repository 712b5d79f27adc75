package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// startNATS is a nats-server with JetStream on a loopback port, and no
// Herald: some other project's, as a user may have on 4222.
func startNATS(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return srv.ClientURL(), js
}

func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var names []string
	list := js.StreamNames(context.Background())
	for name := range list.Name() {
		names = append(names, name)
	}
	require.NoError(t, list.Err())
	return names
}

// herald run pointed at a NATS where no Herald runs stops at once, saying
// what it found and what to do, instead of waiting forever for a result;
// and it declares nothing of Herald's on that server.
func TestRunRefusesANATSWithoutHerald(t *testing.T) {
	env := map[string]string{"HERALD_BASE_URL": "http://127.0.0.1:1/v1", "HERALD_MODEL": "m"}
	t.Run("no Herald streams", func(t *testing.T) {
		url, js := startNATS(t)
		env["HERALD_NATS_URL"] = url
		start := time.Now()
		out, code := runHeraldIn(t, t.TempDir(), env, "run", "hello")
		require.Equal(t, 1, code, out)
		require.Less(t, time.Since(start), 15*time.Second)
		require.Contains(t, out, "herald run: the NATS at "+url+" answers, but no Herald runs there: it has no stream TASKS")
		require.Contains(t, out, "Start Herald on it (herald up, or herald serve loop gateway toolrunner), point HERALD_NATS_URL at the NATS your Herald uses")
		require.Empty(t, streamNames(t, js), "nothing declared on a server that is not Herald's")
	})
	t.Run("streams but no loop", func(t *testing.T) {
		url, js := startNATS(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, bus.Ensure(ctx, js, 1))
		env["HERALD_NATS_URL"] = url
		out, code := runHeraldIn(t, t.TempDir(), env, "run", "hello")
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "it has stream TASKS but not the loop's consumer loop-tasks")
		info, err := js.Stream(ctx, bus.StreamTasks)
		require.NoError(t, err)
		require.Zero(t, info.CachedInfo().State.Msgs, "no task published")
	})
}

// Ctrl-C interrupts the turn; when no result comes back (here the loop is
// declared but not running), a second Ctrl-C stops herald run at once, exit
// code 1, instead of waiting out the 15 s grace.
func TestRunSecondCtrlCStopsAtOnce(t *testing.T) {
	url, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, js, 1))
	_, err := js.CreateOrUpdateConsumer(ctx, bus.StreamTasks, jetstream.ConsumerConfig{Durable: "loop-tasks", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)

	var errOut heraldtest.SyncBuffer
	cmd := heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_NATS_URL": url, "HERALD_MODEL": "m"}, "run", "hello")
	cmd.Stderr = &errOut
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		info, err := js.Stream(ctx, bus.StreamTasks)
		return err == nil && info.CachedInfo().State.Msgs == 1
	}, time.Minute, 20*time.Millisecond, "the task was published")
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "^C interrupting…") }, 10*time.Second, 10*time.Millisecond)
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.Equal(t, 1, exitCode(cmd.Wait()), errOut.String())
	require.Less(t, time.Since(start), 10*time.Second, "well inside the 15 s an interrupted turn is given")
	require.Contains(t, errOut.String(), "herald run: stopped at once (Ctrl-C twice), without waiting for the interrupted turn's result")
}

// In chat, a second Ctrl-C during a turn whose interrupt gets no answer
// stops the wait at once and returns to the prompt; the program goes on.
func TestChatSecondCtrlCStopsTheWait(t *testing.T) {
	url, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, js, 1))
	_, err := js.CreateOrUpdateConsumer(ctx, bus.StreamTasks, jetstream.ConsumerConfig{Durable: "loop-tasks", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)

	term := startTerminal(t, heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_NATS_URL": url, "TERM": "xterm"}, "chat"))
	term.waitFor("/help for commands")
	term.typeKeys("hello\r")
	require.Eventually(t, func() bool {
		info, err := js.Stream(ctx, bus.StreamTasks)
		return err == nil && info.CachedInfo().State.Msgs == 1
	}, time.Minute, 20*time.Millisecond, "the task was published")
	term.typeKeys("\x03")
	term.waitFor("^C interrupting…")
	start := time.Now()
	term.typeKeys("\x03")
	term.waitFor("error: stopped at once (Ctrl-C twice)")
	require.Less(t, time.Since(start), 10*time.Second, "well inside the 15 s an interrupted turn is given")
	require.True(t, term.running(), "Ctrl-C stops the turn, never the program")
	term.typeKeys("/exit\r")
	require.Equal(t, 0, term.exited())
}
