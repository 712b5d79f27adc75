package api_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type fireRecord struct {
	At     time.Time `json:"at"`
	Due    time.Time `json:"due"`
	RunID  string    `json:"run_id"`
	Missed bool      `json:"missed"`
	Late   bool      `json:"late"`
}

type scheduleState struct {
	ID          string       `json:"id"`
	Fires       int          `json:"fires"`
	MissedFires int          `json:"missed_fires"`
	Missed      string       `json:"missed"`
	NextFire    time.Time    `json:"next_fire"`
	RecentFires []fireRecord `json:"recent_fires"`
}

func scheduleStates(t *testing.T, h *instance) map[string]scheduleState {
	t.Helper()
	out, errOut, code := h.cli(t, "schedules", "list", "--json")
	require.Equal(t, 0, code, errOut)
	var list []scheduleState
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	m := map[string]scheduleState{}
	for _, s := range list {
		m[s.ID] = s
	}
	return m
}

func addSchedule(t *testing.T, h *instance, args ...string) string {
	t.Helper()
	out, errOut, code := h.cli(t, append([]string{"schedules", "add"}, args...)...)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// settle pauses the schedules and waits until each of their fires' runs
// has finished; it returns how many runs each has, all distinct.
func settle(t *testing.T, h *instance, ids ...string) map[string]int {
	t.Helper()
	for _, id := range ids {
		_, errOut, code := h.cli(t, "schedules", "pause", id)
		require.Equal(t, 0, code, errOut)
	}
	runs := map[string]int{}
	for _, id := range ids {
		// A fire cut by a killed api process is counted before its run
		// starts: its redelivery (the consumer's ack wait) starts it.
		require.Eventually(t, func() bool {
			return len(scheduledRuns(t, h, id)) >= scheduleStates(t, h)[id].Fires
		}, 60*time.Second, 200*time.Millisecond, "every counted fire of %s gets its run", id)
		seen := map[string]bool{}
		for _, key := range scheduledRuns(t, h, id) {
			require.False(t, seen[key], "fire run %s recorded twice", key)
			seen[key] = true
			st := waitRun(t, h, "", strings.TrimPrefix(key, "run."))
			require.Equal(t, "completed", st.Status, key)
		}
		runs[id] = len(seen)
	}
	return runs
}

// A NATS restart across a fire: JetStream makes the missed fire once when
// it is back; run-once runs it (late), skip records it as missed and runs
// nothing; both go on firing on time after. No fire is counted or run twice.
func TestScheduleFireMissedWhileNATSWasDownFollowsItsPolicy(t *testing.T) {
	s := startStack(t)
	s.serveAPI(t)
	s.start(t, "serve", "loop", "gateway", "toolrunner")
	once := addSchedule(t, s.instance, "--every", "4s", "say: once")
	skip := addSchedule(t, s.instance, "--every", "4s", "--missed", "skip", "say: skip")
	var before map[string]scheduleState
	require.Eventually(t, func() bool {
		before = scheduleStates(t, s.instance)
		return before[once].Fires >= 1 && before[skip].Fires >= 1
	}, 60*time.Second, 100*time.Millisecond)
	require.Equal(t, "run-once", before[once].Missed)
	require.Equal(t, "skip", before[skip].Missed)

	s.nats.Shutdown()
	// NATS stays down until both schedules' next fire is overdue by more
	// than its grace (half the 4s interval): a wait for the clock, not
	// for work.
	due := before[once].NextFire
	if before[skip].NextFire.After(due) {
		due = before[skip].NextFire
	}
	require.Eventually(t, func() bool { return time.Now().After(due.Add(3 * time.Second)) }, 30*time.Second, 100*time.Millisecond)
	down := time.Now()
	s.startNATS(t)

	var after map[string]scheduleState
	require.Eventually(t, func() bool {
		after = scheduleStates(t, s.instance)
		return after[once].Fires >= before[once].Fires+2 && after[skip].Fires >= before[skip].Fires+1 &&
			after[skip].MissedFires == 1
	}, 90*time.Second, 200*time.Millisecond, "both schedules fire again after NATS is back")
	runs := settle(t, s.instance, once, skip)
	after = scheduleStates(t, s.instance)

	late := func(sc scheduleState) []fireRecord {
		var out []fireRecord
		for _, f := range sc.RecentFires {
			if f.Late {
				out = append(out, f)
			}
		}
		return out
	}
	lateOnce := late(after[once])
	require.Len(t, lateOnce, 1, "run-once: the fires missed while NATS was down run once: %+v", after[once].RecentFires)
	require.False(t, lateOnce[0].Missed)
	require.True(t, lateOnce[0].At.After(down.Add(-time.Second)), "the late fire was made when NATS came back")
	require.NotEmpty(t, lateOnce[0].RunID)
	require.Zero(t, after[once].MissedFires)

	lateSkip := late(after[skip])
	require.Len(t, lateSkip, 1, "skip: one late fire, recorded as missed: %+v", after[skip].RecentFires)
	require.True(t, lateSkip[0].Missed)
	require.Empty(t, lateSkip[0].RunID)
	require.Equal(t, 1, after[skip].MissedFires)
	require.NotContains(t, scheduledRuns(t, s.instance, skip), "run."+skip+"_"+itoa(lateSkip[0].At.Unix()),
		"a skipped fire starts no run")

	// Counted once each: every counted fire is one run, every run one model call.
	require.Equal(t, after[once].Fires, runs[once])
	require.Equal(t, after[skip].Fires, runs[skip])
	require.Equal(t, runs[once]+runs[skip], s.model.Calls())
	out, _, code := s.cli(t, "schedules", "list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "MISSED")
}

// The api process killed (SIGKILL) in the middle of turning a fire into a
// task, once after the fire was recorded and once after its run started:
// the fire is delivered again to the next api process, which runs it once.
func TestScheduleFireCutByAKilledAPIProcessRunsOnce(t *testing.T) {
	s := startStack(t)
	s.start(t, "serve", "loop", "gateway", "toolrunner")
	id := ""
	for i, point := range []string{"schedule-fire-recorded", "schedule-fire-started"} {
		marker := filepath.Join(s.dir, point)
		crashing := *s.instance
		crashing.env = append(append([]string{}, s.env...), "HERALD_TEST_CRASH="+point+":"+marker)
		api := crashing.start(t, "serve", "api", "--listen", strings.TrimPrefix(s.URL, "http://"))
		waitHTTP(t, s.URL)
		if i == 0 {
			id = addSchedule(t, s.instance, "--every", "2s", "say: tick")
		}
		err := api.Wait()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "the api process is killed at %s", point)
		require.FileExists(t, marker)
	}
	s.serveAPI(t)
	before := scheduleStates(t, s.instance)[id]
	require.Eventually(t, func() bool { return scheduleStates(t, s.instance)[id].Fires >= before.Fires+3 }, 90*time.Second,
		200*time.Millisecond, "the schedule fires on after the kills")
	runs := settle(t, s.instance, id)
	after := scheduleStates(t, s.instance)[id]
	require.Equal(t, after.Fires, runs[id], "every counted fire is one run")
	require.Equal(t, runs[id], s.model.Calls(), "and one model call: none ran twice")
	// The fires cut by the kills are among them, run.
	require.GreaterOrEqual(t, len(after.RecentFires), 2)
	for _, f := range after.RecentFires[:2] {
		require.NotEmpty(t, f.RunID)
		require.Contains(t, scheduledRuns(t, s.instance, id), "run."+f.RunID)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// `herald up` killed (SIGKILL: its NATS, api and loop at once) and started
// again on the same folder after a fire's time: the run-once schedule runs
// that fire once when Herald is back, the skip schedule records it missed.
func TestScheduleFireMissedWhileHeraldUpWasKilledFollowsItsPolicy(t *testing.T) {
	h := startHerald(t, "")
	once := addSchedule(t, h, "--every", "4s", "say: once")
	skip := addSchedule(t, h, "--every", "4s", "--missed", "skip", "say: skip")
	var before map[string]scheduleState
	require.Eventually(t, func() bool {
		before = scheduleStates(t, h)
		return before[once].Fires >= 1 && before[skip].Fires >= 1
	}, 60*time.Second, 100*time.Millisecond)
	require.NoError(t, h.up.Process.Kill())
	_ = h.up.Wait()
	// Down until both next fires are overdue by more than their grace: a
	// wait for the clock, not for work.
	due := before[once].NextFire
	if before[skip].NextFire.After(due) {
		due = before[skip].NextFire
	}
	require.Eventually(t, func() bool { return time.Now().After(due.Add(3 * time.Second)) }, 30*time.Second, 100*time.Millisecond)
	h.up = h.start(t, h.upArgs...)
	waitHTTP(t, h.URL)

	var after map[string]scheduleState
	require.Eventually(t, func() bool {
		after = scheduleStates(t, h)
		return after[once].Fires >= before[once].Fires+2 && after[skip].MissedFires == 1 && after[skip].Fires >= before[skip].Fires+1
	}, 90*time.Second, 200*time.Millisecond, "both schedules fire again after herald up is back")
	runs := settle(t, h, once, skip)
	after = scheduleStates(t, h)
	lateOnce, lateSkip := 0, 0
	for _, f := range after[once].RecentFires {
		if f.Late {
			lateOnce++
			require.False(t, f.Missed)
			require.Contains(t, scheduledRuns(t, h, once), "run."+f.RunID)
		}
	}
	for _, f := range after[skip].RecentFires {
		if f.Late {
			lateSkip++
			require.True(t, f.Missed)
		}
	}
	require.Equal(t, 1, lateOnce, "run-once: %+v", after[once].RecentFires)
	require.Equal(t, 1, lateSkip, "skip: %+v", after[skip].RecentFires)
	require.Equal(t, after[once].Fires, runs[once])
	require.Equal(t, after[skip].Fires, runs[skip])
}
