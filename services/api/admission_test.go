package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// firstSeq is the stream sequence of the first of evs that ok accepts.
func firstSeq(t *testing.T, evs []sseEvent, ok func(proto.Event, map[string]any) bool) uint64 {
	t.Helper()
	for _, ev := range evs {
		var e proto.Event
		var raw map[string]any
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &e))
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &raw))
		if ok(e, raw) {
			n, err := strconv.ParseUint(ev.ID, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no such event among %v", eventTypes(evs))
	return 0
}

// requireStartedAfter checks that the run whose events are evs started
// (its first THINKING event was stored) after the durable result of the
// session prev was stored. The run's slot passes on that result, which the
// loop stores before it sends the result event: the events alone do not
// order the two, since a run may start before the result event of the one
// before it is stored.
func requireStartedAfter(t *testing.T, js jetstream.JetStream, evs []sseEvent, prev, msg string) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	isThinking := func(e proto.Event, _ map[string]any) bool { return e.State == proto.StateThinking }
	events, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	started, err := events.GetMsg(ctx, firstSeq(t, evs, isThinking))
	require.NoError(t, err)
	result, err := bus.LastOnSubject(ctx, js, bus.StreamSessions, bus.SessionResult(prev))
	require.NoError(t, err)
	require.True(t, started.Time.After(result.Time), "%s: started %s, the result before it stored %s",
		msg, started.Time.Format(time.RFC3339Nano), result.Time.Format(time.RFC3339Nano))
}

func positions(t *testing.T, evs []sseEvent) []int {
	var out []int
	for _, ev := range evs {
		if ev.Event == "queued" {
			var q struct{ Position int }
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &q))
			out = append(out, q.Position)
		}
	}
	return out
}

func TestRunsBeyondATenantsLimitWaitInOrderAndSayTheirPlace(t *testing.T) {
	h := startHerald(t, "tenants:\n  acme:\n    max_concurrent_runs: 1\n")
	js := h.js(t)
	var runs []runCreated
	for i := range 3 {
		runs = append(runs, startRun(t, h, "", map[string]any{"prompt": "wait: run " + strconv.Itoa(i), "tenant": "acme"}))
	}
	other := startRun(t, h, "", map[string]any{"prompt": "say: not acme", "tenant": "beta"})
	require.Equal(t, []string{"running", "queued", "queued"}, []string{runs[0].Status, runs[1].Status, runs[2].Status})
	require.Equal(t, []int{0, 1, 2}, []int{runs[0].Position, runs[1].Position, runs[2].Position})
	require.Equal(t, "running", other.Status, "another tenant's run is not held back")
	var events [][]sseEvent
	for _, rc := range runs {
		st := waitRun(t, h, "", rc.RunID)
		require.Equal(t, "completed", st.Status)
		events = append(events, storedEvents(t, js, rc.SessionID, rc.RunID))
	}
	require.Empty(t, positions(t, events[0]))
	require.Equal(t, []int{1}, positions(t, events[1]))
	require.Equal(t, []int{2, 1}, positions(t, events[2]), "the third run is told when it moves up")
	for i := 1; i < 3; i++ {
		requireStartedAfter(t, js, events[i], runs[i-1].SessionID, fmt.Sprintf("run %d starts only after run %d finished", i, i-1))
	}

	// A key's own cap counts too.
	out, _, code := h.cli(t, "keys", "create", "--tenant", "gamma", "--max-concurrent", "1")
	require.Equal(t, 0, code)
	key := strings.TrimSpace(out)
	a := startRun(t, h, key, map[string]any{"prompt": "wait: first"})
	b := startRun(t, h, key, map[string]any{"prompt": "wait: second"})
	require.Equal(t, "queued", b.Status)
	require.Equal(t, 1, b.Position)
	waitRun(t, h, key, a.RunID)
	require.Equal(t, "completed", waitRun(t, h, key, b.RunID).Status)
}

func TestRunsBeyondALimitAreRefusedWith429WhenConfigured(t *testing.T) {
	h := startHerald(t, "api:\n  over_limit: reject\ntenants:\n  acme:\n    max_concurrent_runs: 1\n")
	first := startRun(t, h, "", map[string]any{"prompt": "wait: first", "tenant": "acme"})
	var e apiErr
	resp := call(t, "POST", h.URL+"/v1/runs", "", map[string]any{"prompt": "say: second", "tenant": "acme", "task_id": "second"}, &e)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Equal(t, "rate_limit_error", e.Error.Type)
	resp = call(t, "GET", h.URL+"/v1/runs/second", "", nil, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a refused run leaves nothing behind")
	waitRun(t, h, "", first.RunID)
	require.Eventually(t, func() bool {
		return call(t, "POST", h.URL+"/v1/runs", "", map[string]any{"prompt": "say: second", "tenant": "acme", "task_id": "second"}, nil).StatusCode == http.StatusOK
	}, 30e9, 50e6, "the slot is free once the first run finished")
}

// Two api processes on one bus hold a tenant's and a key's limits between
// them: a run beyond a limit on the second process waits for the first's,
// says its place, and starts when that one ends; rejecting holds too.
func TestLimitsHoldAcrossAPIProcesses(t *testing.T) {
	h := startHerald(t, "tenants:\n  acme:\n    max_concurrent_runs: 1\n")
	second := *h
	second.URL = fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	second.start(t, "serve", "api", "--listen", strings.TrimPrefix(second.URL, "http://"))
	waitHTTP(t, second.URL)

	first := startRun(t, h, "", map[string]any{"prompt": "wait: on the first process", "tenant": "acme"})
	require.Equal(t, "running", first.Status)
	other := startRun(t, &second, "", map[string]any{"prompt": "wait: on the second process", "tenant": "acme"})
	require.Equal(t, "queued", other.Status, "the first process's run holds acme's only slot")
	require.Equal(t, 1, other.Position)
	require.Equal(t, "completed", waitRun(t, h, "", first.RunID).Status)
	require.Equal(t, "completed", waitRun(t, &second, "", other.RunID).Status)
	evs := storedEvents(t, h.js(t), other.SessionID, other.RunID)
	requireStartedAfter(t, h.js(t), evs, first.SessionID, "the second process's run started after the first's ended")

	// A key's cap is one across processes too.
	out, _, code := h.cli(t, "keys", "create", "--tenant", "gamma", "--max-concurrent", "1")
	require.Equal(t, 0, code)
	key := strings.TrimSpace(out)
	a := startRun(t, h, key, map[string]any{"prompt": "wait: first"})
	require.Equal(t, "running", a.Status)
	b := startRun(t, &second, key, map[string]any{"prompt": "say: second"})
	require.Equal(t, "queued", b.Status)
	waitRun(t, h, key, a.RunID)
	require.Equal(t, "completed", waitRun(t, &second, key, b.RunID).Status)
}
