package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// A run cancelled before the loop took its task (no loop runs yet, so the
// task waits in its stream) ends interrupted when the loop starts, without
// a model call; a run started after is not touched.
func TestCancelBeforeTheLoopTookTheTaskEndsItUnstarted(t *testing.T) {
	s := startStack(t)
	s.serveAPI(t)

	plain := startRun(t, s.instance, "", map[string]any{"prompt": "say: never said"})
	r := call(t, "POST", s.URL+"/v1/runs/"+plain.RunID+"/cancel", "", nil, nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode)

	// A key's run goes on its tenant's subjects, its cancel too.
	out, errOut, code := s.cli(t, "keys", "create", "--tenant", "acme")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	keyed := startRun(t, s.instance, key, map[string]any{"prompt": "say: never said either"})
	r = call(t, "POST", s.URL+"/v1/runs/"+keyed.RunID+"/cancel", key, nil, nil)
	require.Equal(t, http.StatusAccepted, r.StatusCode)

	s.start(t, "serve", "loop", "gateway", "toolrunner")
	st := waitRun(t, s.instance, key, keyed.RunID)
	require.Equal(t, "cancelled", st.Status)
	require.Equal(t, proto.ExitInterrupted, st.Result.ExitReason)
	// The first run is no key's (a key's requests see only its tenant's
	// runs): its stored result says how it ended.
	js := s.js(t)
	var res proto.Result
	require.Eventually(t, func() bool {
		m, err := bus.LastOnSubject(ctxT(t, 5*time.Second), js, bus.StreamSessions, bus.SessionResult(plain.SessionID))
		return err == nil && json.Unmarshal(m.Data, &res) == nil
	}, 60*time.Second, 20*time.Millisecond)
	require.Equal(t, plain.RunID, res.TaskID)
	require.Equal(t, proto.ExitInterrupted, res.ExitReason)
	require.Zero(t, s.model.Calls(), "a run cancelled before it started never asks the model")

	after := startRun(t, s.instance, key, map[string]any{"prompt": "say: still here"})
	st = waitRun(t, s.instance, key, after.RunID)
	require.Equal(t, "completed", st.Status)
	require.Equal(t, "still here", st.Result.FinalResponse)
	// The same session, continued after its cancelled first turn, answers too.
	next := startRun(t, s.instance, key, map[string]any{"prompt": "say: continued", "session_id": keyed.SessionID})
	st = waitRun(t, s.instance, key, next.RunID)
	require.Equal(t, "completed", st.Status)
	require.Equal(t, "continued", st.Result.FinalResponse)
}

// An interrupt naming another task (a stale cancel, or a forged one) does
// not stop the turn going; one naming the turn's own task does.
func TestAnInterruptNamingAnotherTaskLeavesTheTurnAlone(t *testing.T) {
	h := startHerald(t, "")
	js := h.js(t)
	rc := startRun(t, h, "", map[string]any{"prompt": "wait: still going"})
	waitEvent(t, h, rc.RunID, func(e proto.Event) bool { return e.State == proto.StateThinking })
	require.NoError(t, bus.PublishJSON(ctxT(t, 5*time.Second), js, bus.SessionInterrupt(rc.SessionID), "",
		proto.Interrupt{Reason: "not yours", TaskID: "run_someone_else"}))
	st := waitRun(t, h, "", rc.RunID)
	require.Equal(t, "completed", st.Status)
	require.Equal(t, "still going", st.Result.FinalResponse)

	next := startRun(t, h, "", map[string]any{"prompt": "wait: cut short", "session_id": rc.SessionID})
	waitEvent(t, h, next.RunID, func(e proto.Event) bool { return e.State == proto.StateThinking })
	require.NoError(t, bus.PublishJSON(ctxT(t, 5*time.Second), js, bus.SessionInterrupt(rc.SessionID), "",
		proto.Interrupt{Reason: "yours", TaskID: next.RunID}))
	st = waitRun(t, h, "", next.RunID)
	require.Equal(t, "cancelled", st.Status)
}

// A run cancelled while it waited for its tenant's slot stays cancelled
// when the api process is restarted: the new process does not queue it
// again, so it never reaches the loop, even once the slot is free.
func TestARunCancelledWhileQueuedStaysCancelledAcrossARestart(t *testing.T) {
	s := startStack(t)
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "herald.yaml"), []byte("tenants:\n  acme:\n    max_concurrent_runs: 1\n"), 0o600))
	api := s.start(t, "serve", "api", "--listen", strings.TrimPrefix(s.URL, "http://"))
	waitHTTP(t, s.URL)
	// no loop yet: the first run holds acme's slot until one starts
	first := startRun(t, s.instance, "", map[string]any{"prompt": "say: first", "tenant": "acme"})
	require.Equal(t, "running", first.Status)
	queued := startRun(t, s.instance, "", map[string]any{"prompt": "say: cancelled-marker", "tenant": "acme"})
	require.Equal(t, "queued", queued.Status)
	var st runState
	r := call(t, "POST", s.URL+"/v1/runs/"+queued.RunID+"/cancel", "", nil, &st)
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Equal(t, "cancelled", st.Status)

	require.NoError(t, api.Process.Signal(syscall.SIGINT))
	_ = api.Wait()
	s.serveAPI(t)
	s.start(t, "serve", "loop", "gateway", "toolrunner")
	require.Equal(t, "completed", waitRun(t, s.instance, "", first.RunID).Status)
	// a run queued after the cancelled one starts after it would have
	later := startRun(t, s.instance, "", map[string]any{"prompt": "say: later", "tenant": "acme"})
	require.Equal(t, "completed", waitRun(t, s.instance, "", later.RunID).Status)

	st = waitRun(t, s.instance, "", queued.RunID)
	require.Equal(t, "cancelled", st.Status)
	require.Equal(t, proto.ExitInterrupted, st.Result.ExitReason)
	require.Equal(t, 2, s.model.Calls(), "the first and the later run asked the model, the cancelled one did not")
	for _, req := range s.model.Requests() {
		for _, m := range req.Messages {
			require.NotContains(t, m.Text(), "cancelled-marker")
		}
	}
}
