package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/api"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// startAPI runs the api service as `herald serve api --listen` does,
// connected as the NATS user api; it returns the base URL.
func startAPI(t *testing.T, s *secured, cfg config.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg.NATSURL = s.url("api")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a, err := app.Start(ctx, app.Options{Config: cfg, Services: []string{api.Name}, Instance: "api", APIListen: addr,
		Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), ConnectTimeout: 5 * time.Second})
	require.NoError(t, err, "the api starts under user api; server refused: %v", s.violations())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	return "http://" + addr
}

// apiCall sends a JSON request with an optional key and decodes the answer.
func apiCall(t *testing.T, method, url, key string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), "%s %s: %s", method, url, data)
	}
	return resp.StatusCode
}

type apiRun struct {
	RunID     string        `json:"run_id"`
	SessionID string        `json:"session_id"`
	Status    string        `json:"status"`
	Result    *proto.Result `json:"result"`
}

// TestAPIRunsUnderItsOwnUserAndCannotPublishOutsideItsGrants runs the api
// as the NATS user api beside the services under theirs: a run started over
// HTTP whose clarify question is answered over HTTP while its events stream,
// a Responses call, a key's run (its tenant's subjects), a schedule that
// JetStream fires and the api turns into a run — all without one
// permission violation. Then the api's credentials attack: they cannot
// start subagents, model or tool calls, forge results, usage, transcripts
// or fires, write session state or keys, nor take another service's work.
func TestAPIRunsUnderItsOwnUserAndCannotPublishOutsideItsGrants(t *testing.T) {
	s := startSecured(t)
	admin := s.declared(t)
	cfg := stackConfig(t, "")
	for _, name := range []string{"loop", "gateway", "toolrunner", "memory"} {
		startService(t, s, cfg, name)
	}
	base := startAPI(t, s, cfg)

	// A run over HTTP, its clarify question answered over HTTP from its event stream.
	var rn apiRun
	require.Equal(t, http.StatusOK, apiCall(t, "POST", base+"/v1/runs", "", map[string]any{"prompt": taskPrompt}, &rn))
	resp, err := http.Get(base + "/v1/runs/" + rn.RunID + "/events")
	require.NoError(t, err)
	events := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		events++
		var ev proto.Event
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		if ev.Type == proto.EventClarify {
			require.Equal(t, http.StatusAccepted, apiCall(t, "POST", base+"/v1/runs/"+rn.RunID+"/input", "",
				map[string]any{"request_id": ev.RequestID, "answer": "green"}, nil), "server refused: %v", s.violations())
		}
		if ev.Type == proto.EventResult {
			break
		}
	}
	resp.Body.Close()
	require.Positive(t, events)
	require.Equal(t, http.StatusOK, apiCall(t, "GET", base+"/v1/runs/"+rn.RunID, "", nil, &rn))
	require.Equal(t, "completed", rn.Status, "server refused: %v", s.violations())
	require.Equal(t, "You like green tea.", rn.Result.FinalResponse)
	require.Equal(t, http.StatusConflict, apiCall(t, "POST", base+"/v1/runs/"+rn.RunID+"/cancel", "", nil, nil))

	// The Responses route: one turn, answered.
	var out struct {
		Status string `json:"status"`
	}
	require.Equal(t, http.StatusOK, apiCall(t, "POST", base+"/v1/responses", "", map[string]any{"model": "herald", "input": "hello"}, &out))
	require.Equal(t, "completed", out.Status)

	// A key (herald keys create writes it, as admin): its runs go on its tenant's subjects.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, key, err := api.CreateKey(ctx, admin.js, "acme", "deploy", 0)
	require.NoError(t, err)
	var keyed apiRun
	require.Equal(t, http.StatusOK, apiCall(t, "POST", base+"/v1/runs", key, map[string]any{"prompt": "hello"}, &keyed))
	require.Eventually(t, func() bool {
		apiCall(t, "GET", base+"/v1/runs/"+keyed.RunID, key, nil, &keyed)
		return keyed.Status == "completed"
	}, 30*time.Second, 20*time.Millisecond, "the key's run completes; server refused: %v", s.violations())

	// A schedule: armed by the api, fired by JetStream, turned into a run by the api.
	var sched struct {
		ID        string `json:"id"`
		Fires     int    `json:"fires"`
		LastRunID string `json:"last_run_id"`
	}
	require.Equal(t, http.StatusOK, apiCall(t, "POST", base+"/v1/schedules", key, map[string]any{"every": "1s", "prompt": "hello"}, &sched))
	require.Eventually(t, func() bool {
		apiCall(t, "GET", base+"/v1/schedules/"+sched.ID, key, nil, &sched)
		return sched.Fires >= 1
	}, 30*time.Second, 50*time.Millisecond, "the schedule fires; server refused: %v", s.violations())
	require.Equal(t, http.StatusOK, apiCall(t, "DELETE", base+"/v1/schedules/"+sched.ID, key, nil, nil))
	var fired apiRun
	require.Eventually(t, func() bool {
		apiCall(t, "GET", base+"/v1/runs/"+sched.LastRunID, key, nil, &fired)
		return fired.Status == "completed"
	}, 30*time.Second, 20*time.Millisecond, "the fire's run completes; server refused: %v", s.violations())
	require.Empty(t, s.violations(), "the api needed no subject its grants lack")

	// The attack: the api's own credentials, used directly.
	a := s.connect(t, "api")
	for _, subj := range []string{
		bus.SubtasksSubject, bus.TenantSubtasks("acme"), // only the loop names a task's parent
		bus.LLMRequest("s1"), bus.ToolCall(bus.DefaultPool, "s1"), bus.MemoryCall("s1"), bus.CompressRequest("s1"),
		bus.SessionResult("s1"), bus.TenantSessionResult("acme", "s1"), bus.SessionLog("s1"),
		bus.ToolResult("s1", "c1"), bus.UsageSubject("acme"), bus.ScheduleFire("sch_x"),
		"$KV.herald_sessions.s1", "$KV.herald_api_keys.key_forged",
		"$JS.API.STREAM.DELETE.SCHEDULES", "$JS.API.STREAM.PURGE.TASKS", "$JS.API.STREAM.CREATE.X",
		"$JS.API.CONSUMER.MSG.NEXT.TASKS.loop-tasks", "$JS.API.CONSUMER.CREATE.SESSIONS.peek.herald.internal.session.*.log",
	} {
		require.NoError(t, a.nc.Publish(subj, []byte("{}")))
		a.requireDenied("publish", subj)
	}
	for _, subj := range []string{"herald.internal.session.*.log", "herald.session.*.input", "herald.llm.response.>", "herald.hooks.>"} {
		_, err := a.nc.SubscribeSync(subj)
		require.NoError(t, err)
		a.requireDenied("subscription", subj)
	}
	n, err := bus.PendingWork(ctx, admin.js, bus.StreamLLMRequests)
	require.NoError(t, err)
	require.Zero(t, n, "no forged model call was stored")
}
