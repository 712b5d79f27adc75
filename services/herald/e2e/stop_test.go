package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// waitToolStarted publishes a task on up and waits until its tool call runs.
func publishAndWaitToolStarted(t *testing.T, up *userUp, sid, prompt string) {
	t.Helper()
	nc, err := nats.Connect(up.url)
	require.NoError(t, err)
	defer nc.Close()
	events, err := nc.SubscribeSync("herald.session." + sid + ".events")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("herald.tasks", []byte(`{"session_id":"`+sid+`","prompt":"`+prompt+`"}`)))
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		msg, err := events.NextMsg(time.Until(deadline))
		require.NoError(t, err, "no tool_started; herald up: %s", up.stderr)
		var ev proto.Event
		require.NoError(t, json.Unmarshal(msg.Data, &ev))
		if ev.Type == proto.EventToolStarted {
			return
		}
	}
	t.Fatalf("no tool_started; herald up: %s", up.stderr)
}

// exited waits for up's process to end within limit.
func exited(t *testing.T, up *userUp, limit time.Duration, why string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- up.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s: herald up still running after %s: %s", why, limit, up.stderr)
	}
}

// Stopping `herald up` with a tool call in flight: the first Ctrl-C says
// what it waits for and for how long; a second stops at once. Nothing is
// lost: the next `herald up` on the folder finishes the task (the cut-short
// call reported "outcome unknown", never run twice). Without a second
// Ctrl-C, the drain ends after --drain.
func TestUpStopsWithinItsDrainAndAtOnceOnASecondInterrupt(t *testing.T) {
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		if r.AssistantCount() == 0 {
			return scripted.Tool("terminal", `{"command":"sleep 120"}`)
		}
		return scripted.Text("finished after the stop")
	})
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}

	up := startUserUp(t, ctx, dir, env, "--drain", "2m")
	publishAndWaitToolStarted(t, up, "s1", "sleep a while")
	require.NoError(t, up.cmd.Process.Signal(os.Interrupt))
	require.Eventually(t, func() bool {
		return strings.Contains(up.stderr.String(), "herald up: stopping — waiting up to 2m0s for the work in flight (loop steps, model calls, tool calls) to finish; Ctrl-C again stops now")
	}, 30*time.Second, 20*time.Millisecond, "the first Ctrl-C says what it waits for: %s", up.stderr)
	require.Nil(t, up.cmd.ProcessState, "the first Ctrl-C waits for the call in flight")
	require.NoError(t, up.cmd.Process.Signal(os.Interrupt))
	exited(t, up, 30*time.Second, "a second Ctrl-C stops at once")
	require.Contains(t, up.stderr.String(), "herald up: stopping now")

	// The same folder, started again: the task ends, nothing lost.
	up = startUserUp(t, ctx, dir, env, "--drain", "1s")
	nc, err := nats.Connect(up.url)
	require.NoError(t, err)
	defer nc.Close()
	var res proto.Result
	require.Eventually(t, func() bool {
		res = proto.Result{}
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		subject := "herald.session.s1.result"
		name, err := js.StreamNameBySubject(ctx, subject)
		if err != nil {
			return false
		}
		stream, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		return err == nil && json.Unmarshal(msg.Data, &res) == nil
	}, 90*time.Second, 100*time.Millisecond, "the task never finished after the restart: %s", up.stderr)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "finished after the stop", res.FinalResponse)
	reqs := model.Requests()
	require.Contains(t, reqs[len(reqs)-1].LastMessage().Text(), "outcome unknown", "the model is told the cut-short call's outcome is unknown")

	// One Ctrl-C: the drain ends after --drain, not when the call would.
	publishAndWaitToolStarted(t, up, "s2", "sleep again")
	require.NoError(t, up.cmd.Process.Signal(os.Interrupt))
	exited(t, up, 30*time.Second, "--drain 1s bounds the stop")
}

// `herald serve toolrunner` stops the same way: it says what it waits for,
// a second Ctrl-C stops it at once, and the call it cut short is reported
// to the task, which ends.
func TestServeStopsAtOnceOnASecondInterrupt(t *testing.T) {
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		if r.AssistantCount() == 0 {
			return scripted.Tool("terminal", `{"command":"sleep 120"}`)
		}
		return scripted.Text("the runner stopped")
	})
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m"}
	up := startUserUp(t, ctx, t.TempDir(), env)
	env["HERALD_NATS_URL"] = up.url
	runner := &userUp{url: up.url, stderr: &heraldtest.SyncBuffer{}}
	runner.cmd = heraldCmd(t, ctx, t.TempDir(), env, "serve", "toolrunner", "--pool", "edge", "--drain", "2m")
	runner.cmd.Stderr = runner.stderr
	require.NoError(t, runner.cmd.Start())
	t.Cleanup(func() {
		if runner.cmd.ProcessState == nil {
			_ = runner.cmd.Process.Kill()
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(runner.stderr.String(), "tool runner started") },
		60*time.Second, 20*time.Millisecond, "%s", runner.stderr)

	nc, err := nats.Connect(up.url)
	require.NoError(t, err)
	defer nc.Close()
	results, err := nc.SubscribeSync("herald.session.s3.result")
	require.NoError(t, err)
	events, err := nc.SubscribeSync("herald.session.s3.events")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("herald.tasks", []byte(`{"session_id":"s3","prompt":"sleep on the edge","pool":"edge"}`)))
	for {
		msg, err := events.NextMsg(90 * time.Second)
		require.NoError(t, err, "no tool_started: %s", runner.stderr)
		var ev proto.Event
		require.NoError(t, json.Unmarshal(msg.Data, &ev))
		if ev.Type == proto.EventToolStarted {
			break
		}
	}
	require.NoError(t, runner.cmd.Process.Signal(os.Interrupt))
	require.Eventually(t, func() bool {
		return strings.Contains(runner.stderr.String(), "herald serve: stopping — waiting up to 2m0s for the work in flight")
	}, 30*time.Second, 20*time.Millisecond, "%s", runner.stderr)
	require.NoError(t, runner.cmd.Process.Signal(os.Interrupt))
	exited(t, runner, 30*time.Second, "a second Ctrl-C stops herald serve at once")

	msg, err := results.NextMsg(90 * time.Second)
	require.NoError(t, err, "up: %s", up.stderr)
	var res proto.Result
	require.NoError(t, json.Unmarshal(msg.Data, &res))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	reqs := model.Requests()
	require.Contains(t, reqs[len(reqs)-1].LastMessage().Text(), "outcome unknown")
}
