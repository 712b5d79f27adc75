package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// acmeKey creates a key of tenant acme with max_concurrent n; it returns
// the key's id and secret.
func acmeKey(t *testing.T, s *stack, n string) (string, string) {
	t.Helper()
	out, errOut, code := s.cli(t, "keys", "create", "--tenant", "acme", "--max-concurrent", n, "--json")
	require.Equal(t, 0, code, errOut)
	var k struct{ ID, Key string }
	require.NoError(t, json.Unmarshal([]byte(out), &k))
	return k.ID, k.Key
}

// A schedule's fires run as its key is now: under its max_concurrent,
// so a fire while the key's only slot is taken waits its turn.
func TestAScheduleFireIsHeldToItsKeysConcurrency(t *testing.T) {
	s := startStack(t)
	s.serveAPI(t) // no loop: a run started holds its slot for the test's length
	_, secret := acmeKey(t, s, "1")
	first := startRun(t, s.instance, secret, map[string]any{"prompt": "say: holds the key's slot"})
	require.Equal(t, "running", first.Status)
	var sc struct{ ID string }
	r := call(t, "POST", s.URL+"/v1/schedules", secret, map[string]any{"every": "1s", "prompt": "say: scheduled"}, &sc)
	require.Equal(t, http.StatusOK, r.StatusCode)
	var runs []string
	require.Eventually(t, func() bool {
		runs = scheduledRuns(t, s.instance, sc.ID)
		return len(runs) >= 1
	}, 30*time.Second, 100*time.Millisecond, "the schedule fires")
	var st runState
	call(t, "GET", s.URL+"/v1/runs/"+strings.TrimPrefix(runs[0], "run."), secret, nil, &st)
	require.Equal(t, "queued", st.Status, "the key's one slot is taken: its schedule's run waits")
	_, errOut, code := s.cli(t, "schedules", "pause", sc.ID)
	require.Equal(t, 0, code, errOut)
}

// A schedule whose key was revoked fires no more: its next fire is dropped
// and the schedule disabled, saying why, while other schedules go on.
func TestAScheduleOfARevokedKeyStopsFiring(t *testing.T) {
	s := startStack(t)
	s.serveAPI(t)
	keyID, secret := acmeKey(t, s, "0")
	var sc struct{ ID string }
	r := call(t, "POST", s.URL+"/v1/schedules", secret, map[string]any{"every": "1s", "prompt": "say: scheduled"}, &sc)
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Eventually(t, func() bool { return len(scheduledRuns(t, s.instance, sc.ID)) >= 1 }, 30*time.Second,
		100*time.Millisecond, "the schedule fires while its key is valid")

	_, errOut, code := s.cli(t, "keys", "revoke", keyID)
	require.Equal(t, 0, code, errOut)
	var disabled listedSchedule
	require.Eventually(t, func() bool {
		disabled = schedules(t, s.instance)[sc.ID]
		return disabled.Disabled != ""
	}, 30*time.Second, 100*time.Millisecond, "the schedule is disabled at its next fire")
	require.True(t, disabled.Paused)
	require.Contains(t, disabled.Disabled, keyID)
	runs := len(scheduledRuns(t, s.instance, sc.ID))

	// time for several fires: another schedule fires twice more
	other := addSchedule(t, s.instance, "--every", "1s", "say: tick")
	require.Eventually(t, func() bool { return scheduleStates(t, s.instance)[other].Fires >= 3 }, 30*time.Second,
		100*time.Millisecond, "the other schedule fires")
	require.Equal(t, runs, len(scheduledRuns(t, s.instance, sc.ID)), "the revoked key's schedule started nothing more")
	require.Equal(t, disabled.Fires, schedules(t, s.instance)[sc.ID].Fires, "nor counted a fire")
}
