package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

var shared struct {
	once sync.Once
	h    *instance
	t    *testing.T
}

type runCreated struct {
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id"`
	Tenant    string `json:"tenant"`
	Status    string `json:"status"`
	Position  int    `json:"queue_position"`
}

type runState struct {
	RunID     string        `json:"run_id"`
	SessionID string        `json:"session_id"`
	Tenant    string        `json:"tenant"`
	Status    string        `json:"status"`
	Result    *proto.Result `json:"result"`
}

type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func startRun(t *testing.T, h *instance, key string, task map[string]any) runCreated {
	t.Helper()
	var rc runCreated
	resp := call(t, "POST", h.URL+"/v1/runs", key, task, &rc)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, rc.RunID)
	require.NotEmpty(t, rc.SessionID)
	return rc
}

func waitRun(t *testing.T, h *instance, key, id string) runState {
	t.Helper()
	var st runState
	require.Eventually(t, func() bool {
		st = runState{}
		call(t, "GET", h.URL+"/v1/runs/"+id, key, nil, &st)
		return st.Result != nil
	}, 60*time.Second, 20*time.Millisecond, "run %s finishes", id)
	return st
}

// storedEvents are the run's events as the EVENTS stream holds them: the
// truth a client's stream is checked against.
func storedEvents(t *testing.T, js jetstream.JetStream, sid, runID string) []sseEvent {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	cons, err := js.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SessionEvents(sid)}})
	require.NoError(t, err)
	var out []sseEvent
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(500 * time.Millisecond))
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		require.NoError(t, err)
		var ev proto.Event
		require.NoError(t, json.Unmarshal(msg.Data(), &ev))
		if ev.TaskID != runID {
			continue
		}
		meta, err := msg.Metadata()
		require.NoError(t, err)
		out = append(out, sseEvent{ID: strconv.FormatUint(meta.Sequence.Stream, 10), Event: ev.Type, Data: string(msg.Data())})
	}
}

// follow reads the run's events, dropping the connection after a random
// number of events each time and reconnecting with Last-Event-ID, until the
// result event; base(i) names the api to use for the i-th connection.
func follow(t *testing.T, base func(i int) string, key, id string, rng *rand.Rand) ([]sseEvent, int) {
	t.Helper()
	var got []sseEvent
	last := ""
	for conn := 0; ; conn++ {
		require.Less(t, conn, 500, "the stream ends")
		req, err := http.NewRequest("GET", base(conn)+"/v1/runs/"+id+"/events", nil)
		require.NoError(t, err)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil { // the api is restarting
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		drop := rng.IntN(6) // 0: read to the end
		if conn == 0 {
			drop = 1 + rng.IntN(5)
		}
		n, done := 0, false
		_ = readSSE(resp.Body, func(ev sseEvent) bool {
			got = append(got, ev)
			last = ev.ID
			n++
			if ev.Event == proto.EventResult {
				done = true
				return false
			}
			return drop == 0 || n < drop
		})
		resp.Body.Close()
		if done {
			return got, conn + 1
		}
	}
}

func TestRunEventsResumedAfterRandomDropsAreTheSessionsEventsExactlyOnce(t *testing.T) {
	h := startHerald(t, "")
	js := h.js(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	text := strings.Repeat("Herald streams every token. ", 8)
	for round := range 3 {
		rc := startRun(t, h, "", map[string]any{"prompt": "say: " + text + strconv.Itoa(round)})
		got, conns := follow(t, func(int) string { return h.URL }, "", rc.RunID, rng)
		require.Greater(t, conns, 1, "the client reconnected")
		want := storedEvents(t, js, rc.SessionID, rc.RunID)
		require.Equal(t, want, got, "the events assembled are the session's, in order, none missed or repeated")
		var deltas strings.Builder
		for _, ev := range got {
			var e proto.Event
			require.NoError(t, json.Unmarshal([]byte(ev.Data), &e))
			deltas.WriteString(e.Delta)
		}
		require.Equal(t, text+strconv.Itoa(round), deltas.String())
		st := waitRun(t, h, "", rc.RunID)
		require.Equal(t, "completed", st.Status)
		require.Equal(t, text+strconv.Itoa(round), st.Result.FinalResponse)
	}
}

func TestRunEventsResumeOnARestartedAPIProcess(t *testing.T) {
	h := startHerald(t, "")
	js := h.js(t)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	serveAPI := func() func() {
		cmd := h.start(t, "serve", "api", "--listen", strings.TrimPrefix(apiURL, "http://"))
		waitHTTP(t, apiURL)
		return func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }
	}
	kill := serveAPI()
	rc := startRun(t, h, "", map[string]any{"prompt": "tool: the answer after a tool " + strings.Repeat("x", 60)})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	restarted := false
	got, _ := follow(t, func(i int) string {
		if i == 1 { // after the first connection: kill the api process and start another
			kill()
			kill = serveAPI()
			restarted = true
		}
		return apiURL
	}, "", rc.RunID, rng)
	kill()
	require.True(t, restarted)
	require.Equal(t, storedEvents(t, js, rc.SessionID, rc.RunID), got)
	require.Contains(t, eventTypes(got), proto.EventToolStarted)
}

// waitEvent reads the run's events until one satisfies ok.
func waitEvent(t *testing.T, h *instance, id string, ok func(proto.Event) bool) proto.Event {
	t.Helper()
	resp, err := http.Get(h.URL + "/v1/runs/" + id + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	var found *proto.Event
	_ = readSSE(resp.Body, func(ev sseEvent) bool {
		var e proto.Event
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &e))
		if ok(e) {
			found = &e
			return false
		}
		return true
	})
	require.NotNil(t, found, "run %s sent the event waited for", id)
	return *found
}

func eventTypes(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Event)
	}
	return out
}

func TestRunStateCancelAndInput(t *testing.T) {
	h := startHerald(t, "approvals:\n  mode: manual\n")
	// clarify: the run waits for an answer given through /input.
	rc := startRun(t, h, "", map[string]any{"prompt": "clarify: noted"})
	var reqID string
	req, err := http.NewRequest("GET", h.URL+"/v1/runs/"+rc.RunID+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = readSSE(resp.Body, func(ev sseEvent) bool {
		if ev.Event != proto.EventClarify {
			return true
		}
		var e proto.Event
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &e))
		reqID = e.RequestID
		require.Equal(t, []string{"red", "blue"}, e.Choices)
		return false
	})
	resp.Body.Close()
	require.NotEmpty(t, reqID)
	var st runState
	call(t, "GET", h.URL+"/v1/runs/"+rc.RunID, "", nil, &st)
	require.Equal(t, "running", st.Status)
	var e apiErr
	r := call(t, "POST", h.URL+"/v1/runs/"+rc.RunID+"/input", "", map[string]any{"answer": "blue"}, &e)
	require.Equal(t, http.StatusBadRequest, r.StatusCode, "an answer must say what it answers")
	require.Equal(t, "invalid_input", e.Error.Code)
	r = call(t, "POST", h.URL+"/v1/runs/"+rc.RunID+"/input", "", map[string]any{"request_id": reqID, "answer": "blue"}, nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	st = waitRun(t, h, "", rc.RunID)
	require.Equal(t, "completed", st.Status)
	require.Contains(t, st.Result.FinalResponse, "blue")

	// cancel: a run waiting on its model is interrupted.
	rc = startRun(t, h, "", map[string]any{"prompt": "wait: too late"})
	waitEvent(t, h, rc.RunID, func(e proto.Event) bool { return e.State == proto.StateThinking })
	r = call(t, "POST", h.URL+"/v1/runs/"+rc.RunID+"/cancel", "", nil, nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode)
	st = waitRun(t, h, "", rc.RunID)
	require.Equal(t, "cancelled", st.Status)
	require.Equal(t, proto.ExitInterrupted, st.Result.ExitReason)
	r = call(t, "POST", h.URL+"/v1/runs/"+rc.RunID+"/cancel", "", nil, &e)
	require.Equal(t, http.StatusConflict, r.StatusCode, "a finished run cannot be cancelled")
	require.Equal(t, "run_finished", e.Error.Code)
}

func TestRunsRefuseBadInputInOpenAIsErrorShapeAndStartNothing(t *testing.T) {
	h := startHerald(t, "")
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"not JSON", "POST", "/v1/runs", `{"prompt": `, 400, "invalid_task"},
		{"unknown field", "POST", "/v1/runs", `{"prompt":"hi","promt":"x"}`, 400, "invalid_task"},
		{"no prompt", "POST", "/v1/runs", `{"session_id":"s1"}`, 400, "invalid_task"},
		{"trailing data", "POST", "/v1/runs", `{"prompt":"hi"} {"prompt":"again"}`, 400, "invalid_task"},
		{"bad session id", "POST", "/v1/runs", `{"prompt":"hi","session_id":"../x"}`, 400, "invalid_task"},
		{"bad task id", "POST", "/v1/runs", `{"prompt":"hi","task_id":"a.b"}`, 400, "invalid_task"},
		{"loop-only field", "POST", "/v1/runs", `{"prompt":"hi","parent_session_id":"p"}`, 400, "invalid_task"},
		{"tenants folder", "POST", "/v1/runs", `{"prompt":"hi","workspace":"tenants/acme"}`, 400, "invalid_task"},
		{"negative budget", "POST", "/v1/runs", `{"prompt":"hi","max_cost_usd":-1}`, 400, "invalid_task"},
		{"array", "POST", "/v1/runs", `[]`, 400, "invalid_task"},
		{"huge", "POST", "/v1/runs", `{"prompt":"` + strings.Repeat("a", 400<<10) + `"}`, 413, "request_too_large"},
		{"unknown run", "GET", "/v1/runs/run_nope", ``, 404, "not_found"},
		{"odd run id", "GET", "/v1/runs/a%2Eb", ``, 404, "not_found"},
		{"events of unknown run", "GET", "/v1/runs/run_nope/events", ``, 404, "not_found"},
		{"bad Last-Event-ID", "GET", "/v1/runs/RUN/events?after=x", ``, 400, "invalid_last_event_id"},
		{"input not JSON", "POST", "/v1/runs/RUN/input", `nope`, 400, "invalid_json"},
		{"input unknown field", "POST", "/v1/runs/RUN/input", `{"request_id":"r","answr":"x"}`, 400, "invalid_json"},
		{"unknown route", "GET", "/v1/nothing", ``, 404, "unknown_route"},
	}
	existing := startRun(t, h, "", map[string]any{"prompt": "hello"})
	calls := h.model.Calls()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e apiErr
			resp := call(t, c.method, h.URL+strings.ReplaceAll(c.path, "RUN", existing.RunID), "", c.body, &e)
			require.Equal(t, c.status, resp.StatusCode)
			require.Equal(t, c.code, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
			require.NotEmpty(t, e.Error.Type)
		})
	}
	waitRun(t, h, "", existing.RunID)
	require.Equal(t, calls+1, h.model.Calls(), "no refused request reached the model")
}
