package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/api"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// apiOnBus is the api service alone, serving HTTP on a loopback port, on a
// real in-process JetStream: no loop takes its tasks, so a run it starts
// holds its slot for the test's length.
func apiOnBus(t *testing.T, cfg api.Config) (*instance, jetstream.JetStream) {
	t.Helper()
	b := heraldtest.StartBus(t)
	cfg.Listen, cfg.OverLimit = "127.0.0.1:0", config.OverLimitQueue
	svc, err := api.New(cfg, service.Deps{NC: b.NC, JS: b.JS, Log: heraldtest.Logger(t), Config: config.Default()})
	require.NoError(t, err)
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	return &instance{URL: "http://" + svc.Addr()}, b.JS
}

// publishedTask says whether a task went out on subject (nothing takes it
// here: the TASKS stream keeps it).
func publishedTask(t *testing.T, js jetstream.JetStream, subject string) bool {
	t.Helper()
	_, err := bus.LastOnSubject(ctxT(t, 10*time.Second), js, bus.StreamTasks, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// Cancelling queued runs ends what held them: nothing of a cancelled run
// stays behind in the process, however many are cancelled.
func TestCancelledQueuedRunsLeaveNothingRunning(t *testing.T) {
	h, _ := apiOnBus(t, api.Config{TenantRuns: map[string]int{"acme": 1}})
	first := startRun(t, h, "", map[string]any{"prompt": "holds the slot", "tenant": "acme"})
	require.Equal(t, "running", first.Status)
	var queued []runCreated
	for i := range 50 {
		rc := startRun(t, h, "", map[string]any{"prompt": fmt.Sprint("waits ", i), "tenant": "acme"})
		require.Equal(t, "queued", rc.Status)
		queued = append(queued, rc)
	}
	require.Eventually(t, func() bool { return awaiting() == 50 }, 10*time.Second, 20*time.Millisecond,
		"each queued run is waited for (%d wait)", awaiting())
	for _, rc := range queued {
		var st runState
		resp := call(t, "POST", h.URL+"/v1/runs/"+rc.RunID+"/cancel", "", nil, &st)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "cancelled", st.Status)
	}
	require.Eventually(t, func() bool { return awaiting() == 0 }, 10*time.Second, 20*time.Millisecond,
		"the cancelled runs' waits end (%d still wait)", awaiting())
	var st runState
	call(t, "GET", h.URL+"/v1/runs/"+queued[0].RunID, "", nil, &st)
	require.Equal(t, "cancelled", st.Status)
}

// awaiting counts the goroutines waiting for a queued run's admission.
func awaiting() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "api.(*Service).await(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A tenant may have only so many runs waiting; the next is refused with
// 429 and starts nothing, while another tenant still queues.
func TestWaitingRunsAreCappedPerTenant(t *testing.T) {
	h, _ := apiOnBus(t, api.Config{MaxQueuedRuns: 2, TenantRuns: map[string]int{"acme": 1, "beta": 1}})
	startRun(t, h, "", map[string]any{"prompt": "runs", "tenant": "acme"})
	var waiting []runCreated
	for range 2 {
		waiting = append(waiting, startRun(t, h, "", map[string]any{"prompt": "waits", "tenant": "acme"}))
		require.Equal(t, "queued", waiting[len(waiting)-1].Status)
	}
	var e apiErr
	resp := call(t, "POST", h.URL+"/v1/runs", "", map[string]any{"prompt": "one too many", "tenant": "acme", "task_id": "over"}, &e)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "queue_full", e.Error.Code)
	require.Equal(t, "rate_limit_error", e.Error.Type)
	require.Contains(t, e.Error.Message, "api.max_queued_runs")
	require.Equal(t, "10", resp.Header.Get("Retry-After"))
	require.Equal(t, http.StatusNotFound, call(t, "GET", h.URL+"/v1/runs/over", "", nil, nil).StatusCode, "a refused run leaves nothing behind")

	startRun(t, h, "", map[string]any{"prompt": "runs", "tenant": "beta"})
	other := startRun(t, h, "", map[string]any{"prompt": "waits", "tenant": "beta"})
	require.Equal(t, "queued", other.Status, "another tenant's runs still queue")

	require.Equal(t, http.StatusOK, call(t, "POST", h.URL+"/v1/runs/"+waiting[0].RunID+"/cancel", "", nil, nil).StatusCode)
	again := startRun(t, h, "", map[string]any{"prompt": "room again", "tenant": "acme"})
	require.Equal(t, "queued", again.Status, "a cancelled run's place in the cap is given back")
}

// The limits bucket failing while a run is admitted (here the tenant's
// record is unreadable, after the key's slot was taken) is a 503 that
// starts nothing and holds nothing: the key's only slot is free after.
func TestAFailedAdmissionIs503AndHoldsNoSlot(t *testing.T) {
	h, js := apiOnBus(t, api.Config{TenantRuns: map[string]int{"acme": 5}})
	ctx := ctxT(t, 30*time.Second)
	k, secret, err := api.CreateKey(ctx, js, "acme", "", 1)
	require.NoError(t, err)
	limits, err := js.KeyValue(ctx, bus.BucketLimits)
	require.NoError(t, err)
	_, err = limits.Put(ctx, bus.SessionsScope("acme"), []byte("not a limits record"))
	require.NoError(t, err)

	var e apiErr
	resp := call(t, "POST", h.URL+"/v1/runs", secret, map[string]any{"prompt": "refused", "task_id": "refused"}, &e)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "unavailable", e.Error.Code)
	require.NotContains(t, e.Error.Message, bus.BucketLimits, "the bus's own names stay in the log")
	require.NotContains(t, e.Error.Message, bus.SessionsScope("acme"))
	require.Equal(t, http.StatusNotFound, call(t, "GET", h.URL+"/v1/runs/refused", secret, nil, nil).StatusCode)
	require.False(t, publishedTask(t, js, bus.TenantAPITasks("acme")), "the refused run was not published")
	holders, err := bus.NewSlots(js).Holders(ctx, bus.KeyRunsScope(k.ID))
	require.NoError(t, err)
	require.Empty(t, holders, "the key's slot taken before the tenant's failed is given back")

	require.NoError(t, limits.Delete(ctx, bus.SessionsScope("acme")))
	rc := startRun(t, h, secret, map[string]any{"prompt": "after"})
	require.Equal(t, "running", rc.Status, "the key's only slot is free")
	require.True(t, publishedTask(t, js, bus.TenantAPITasks("acme")))
}

// A client that sends a request's headers and then trickles its body is cut
// off within the body timeout; an event stream, which sends no body, stays
// open past it and gets its events.
func TestASlowBodyIsCutOffWhileAnEventStreamStaysOpen(t *testing.T) {
	const bound = 300 * time.Millisecond
	h, js := apiOnBus(t, api.Config{BodyTimeout: bound})
	rc := startRun(t, h, "", map[string]any{"prompt": "streamed"})
	resp, err := http.Get(h.URL + "/v1/runs/" + rc.RunID + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	events := make(chan sseEvent, 16)
	go func() {
		defer close(events)
		_ = readSSE(resp.Body, func(ev sseEvent) bool { events <- ev; return true })
	}()

	addr := strings.TrimPrefix(h.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/runs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{", addr)
	require.NoError(t, err)
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		pace := time.NewTicker(50 * time.Millisecond) // a byte a tick: the body would take 10 s
		defer pace.Stop()
		for range 199 {
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
			<-pace.C
		}
	}()
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(start.Add(15*time.Second)))
	reply, err := io.ReadAll(conn)
	require.NoError(t, err, "the server closed the connection")
	require.Less(t, time.Since(start), bound+5*time.Second, "cut off long before the 10 s the body would take")
	require.True(t, strings.HasPrefix(string(reply), "HTTP/1.1 408"), "reply: %s", reply)
	require.Contains(t, string(reply), "request_timeout")
	_ = conn.Close()
	<-trickled

	// the stream has been open longer than the bound: it still delivers
	res := &proto.Result{SessionID: rc.SessionID, TaskID: rc.RunID, ExitReason: proto.ExitTextResponse, FinalResponse: "done"}
	require.NoError(t, bus.PublishJSON(ctxT(t, 10*time.Second), js, bus.SessionEvents(rc.SessionID), "",
		proto.Event{Type: proto.EventResult, SessionID: rc.SessionID, TaskID: rc.RunID, TS: time.Now().UTC().Format(time.RFC3339Nano), Result: res}))
	select {
	case ev, ok := <-events:
		require.True(t, ok, "the event stream was closed")
		require.Equal(t, proto.EventResult, ev.Event)
	case <-time.After(15 * time.Second):
		t.Fatal("the event stream delivered nothing")
	}
}

// A Last-Event-ID no event can have (the one after it would wrap to the
// first) is refused, not read as "from the start".
func TestLastEventIDAtTheTopOfItsRangeIsRefused(t *testing.T) {
	h, _ := apiOnBus(t, api.Config{})
	rc := startRun(t, h, "", map[string]any{"prompt": "streamed"})
	req, err := http.NewRequest("GET", h.URL+"/v1/runs/"+rc.RunID+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Last-Event-ID", "18446744073709551615")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "invalid_last_event_id")
}

// A session started on the bus (herald run, a task on herald.tasks) whose
// first turn is still going has no result yet, only events: a key cannot
// take it over by naming it, nor read its turn by naming its task id too.
// A session id of the client's own choosing still starts a session.
func TestAKeyCannotTakeOverASessionStartedOnTheBus(t *testing.T) {
	h, js := apiOnBus(t, api.Config{})
	_, key, err := api.CreateKey(ctxT(t, 10*time.Second), js, "acme", "k", 0)
	require.NoError(t, err)

	// the loop's first event of someone's turn, as it would publish it
	victim := proto.Event{Type: proto.EventState, SessionID: "s-victim", TaskID: "t-victim", Step: 1}
	data, err := json.Marshal(victim)
	require.NoError(t, err)
	_, err = js.Publish(ctxT(t, 10*time.Second), bus.SessionEvents(victim.SessionID), data)
	require.NoError(t, err)

	var e apiErr
	resp := call(t, "POST", h.URL+"/v1/runs", key, map[string]any{"prompt": "hi", "session_id": victim.SessionID, "task_id": victim.TaskID}, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a key took over a session started on the bus")
	require.False(t, publishedTask(t, js, bus.TenantAPITasks("acme")), "nothing was started")

	own := startRun(t, h, key, map[string]any{"prompt": "hi", "session_id": "s-mine"})
	require.Equal(t, "s-mine", own.SessionID)
}
