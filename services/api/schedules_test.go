package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type listedSchedule struct {
	ID          string    `json:"id"`
	Paused      bool      `json:"paused"`
	Fires       int       `json:"fires"`
	NextFire    time.Time `json:"next_fire"`
	LastRunID   string    `json:"last_run_id"`
	LastSession string    `json:"last_session_id"`
	LastOutcome string    `json:"last_outcome"`
	Disabled    string    `json:"disabled"`
}

func schedules(t *testing.T, h *instance) map[string]listedSchedule {
	t.Helper()
	out, errOut, code := h.cli(t, "schedules", "list", "--json")
	require.Equal(t, 0, code, errOut)
	var list []listedSchedule
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	m := map[string]listedSchedule{}
	for _, s := range list {
		m[s.ID] = s
	}
	return m
}

// scheduledRuns are the runs the api recorded for schedule id's fires.
func scheduledRuns(t *testing.T, h *instance, id string) []string {
	t.Helper()
	kv, err := h.js(t).KeyValue(ctxT(t, 10*time.Second), "herald_api_runs")
	require.NoError(t, err)
	keys, err := kv.Keys(ctxT(t, 10*time.Second))
	require.NoError(t, err)
	var runs []string
	for _, k := range keys {
		if strings.HasPrefix(k, "run."+id+"_") {
			runs = append(runs, k)
		}
	}
	return runs
}

func TestSchedulesFireOnJetStreamPauseResumeAndNeverRunAFireTwice(t *testing.T) {
	h := startHerald(t, "")
	out, errOut, code := h.cli(t, "schedules", "add", "--every", "1s", "--max-cost-usd", "0.5", "--json", "say: tick")
	require.Equal(t, 0, code, errOut)
	var added struct {
		ID       string    `json:"id"`
		NextFire time.Time `json:"next_fire"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &added))
	require.True(t, strings.HasPrefix(added.ID, "sch_"))
	require.WithinDuration(t, time.Now().Add(time.Second), added.NextFire, 5*time.Second)

	require.Eventually(t, func() bool { return schedules(t, h)[added.ID].Fires >= 3 }, 60*time.Second, 100*time.Millisecond,
		"JetStream fires the schedule every second")
	sc := schedules(t, h)[added.ID]
	var st runState
	require.Eventually(t, func() bool {
		call(t, "GET", h.URL+"/v1/runs/"+sc.LastRunID, "", nil, &st)
		return st.Status == "completed"
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "tick", st.Result.FinalResponse)
	require.Equal(t, added.ID, sessionRecord(t, h.js(t), sc.LastSession).ScheduleID, "a fire carries its schedule, whose budget its calls are charged to")

	_, _, code = h.cli(t, "schedules", "pause", added.ID)
	require.Equal(t, 0, code)
	paused := schedules(t, h)[added.ID]
	require.True(t, paused.Paused)
	require.Never(t, func() bool { return schedules(t, h)[added.ID].Fires > paused.Fires }, 2500*time.Millisecond, 250*time.Millisecond,
		"a paused schedule does not fire")
	_, _, code = h.cli(t, "schedules", "resume", added.ID)
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return schedules(t, h)[added.ID].Fires >= paused.Fires+2 }, 60*time.Second, 100*time.Millisecond,
		"a resumed schedule fires again")

	_, _, code = h.cli(t, "schedules", "remove", added.ID)
	require.Equal(t, 0, code)
	require.NotContains(t, schedules(t, h), added.ID)
	final := len(scheduledRuns(t, h, added.ID))
	require.Never(t, func() bool { return len(scheduledRuns(t, h, added.ID)) > final }, 2500*time.Millisecond, 250*time.Millisecond,
		"a removed schedule does not fire")
	// Each fire is one run with its own id: none doubled.
	require.GreaterOrEqual(t, final, paused.Fires+2)
	seen := map[string]bool{}
	for _, r := range scheduledRuns(t, h, added.ID) {
		require.False(t, seen[r])
		seen[r] = true
	}

	_, _, code = h.cli(t, "schedules", "pause", added.ID)
	require.Equal(t, 2, code, "an unknown schedule is a usage error")
	_, errOut, code = h.cli(t, "schedules", "add", "--every", "1s", "--cron", "* * * * *", "x")
	require.Equal(t, 2, code, errOut)
	_, _, code = h.cli(t, "schedules", "add", "--cron", "61 * * * *", "x")
	require.Equal(t, 2, code)
	_, errOut, code = h.cli(t, "schedules", "add", "--every", "1m", "--missed", "later", "x")
	require.Equal(t, 2, code, "an unknown missed-fire policy is a usage error")
	require.Contains(t, errOut, "run-once or skip")
}

func TestSchedulesOverHTTP(t *testing.T) {
	h := startHerald(t, "")
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	var sc listedSchedule
	resp := call(t, "POST", h.URL+"/v1/schedules", "", map[string]any{"at": at, "prompt": "say: once"}, &sc)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool {
		var got listedSchedule
		call(t, "GET", h.URL+"/v1/schedules/"+sc.ID, "", nil, &got)
		return got.Fires == 1 && got.LastRunID != ""
	}, 60*time.Second, 100*time.Millisecond, "an --at schedule fires once")
	var list struct {
		Object string           `json:"object"`
		Data   []listedSchedule `json:"data"`
	}
	call(t, "GET", h.URL+"/v1/schedules", "", nil, &list)
	require.Len(t, list.Data, 1)
	var e apiErr
	for _, bad := range []string{`{"prompt":"x"}`, `{"every":"1ms","prompt":"x"}`, `{"every":"1m"}`, `{"cron":"* * *","prompt":"x"}`,
		`{"at":"2000-01-01T00:00:00Z","prompt":"x"}`, `{"cron":"0 9 * * *","tz":"Mars/Base","prompt":"x"}`, `{"every":"1m","prompt":"x","color":"red"}`, `{"every":"1m","prompt":"x","missed":"sometimes"}`} {
		resp = call(t, "POST", h.URL+"/v1/schedules", "", bad, &e)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
	}
	resp = call(t, "DELETE", h.URL+"/v1/schedules/"+sc.ID, "", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp = call(t, "DELETE", h.URL+"/v1/schedules/"+sc.ID, "", nil, &e)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
