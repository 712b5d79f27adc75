package accounting

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// familyRows are usage rows of two parents with delegated children and of a
// session without any, spread over the last three hours so both the
// roll-ups (whole hours) and raw rows (the partial first hour of a window)
// are read.
func familyRows(prefix string, now time.Time) []*heraldpb.UsageEvent {
	owners := []struct{ session, parent string }{
		{prefix + "p1", ""}, {prefix + "p1-c1", prefix + "p1"}, {prefix + "p1-c2", prefix + "p1"},
		{prefix + "p2", ""}, {prefix + "p2-c1", prefix + "p2"},
		{prefix + "lone", ""},
	}
	var evs []*heraldpb.UsageEvent
	for i := range 30 {
		o := owners[i%len(owners)]
		e := usageEvent(fmt.Sprintf("%sf-%d", prefix, i), "acme", o.session, "gpt-4o-mini",
			now.Add(-time.Duration(i)*6*time.Minute), 100+int64(i), 10+int64(i), uint64(1000+37*i))
		if o.parent != "" {
			e.ParentSessionId, e.Purpose = o.parent, "subagent"
		}
		evs = append(evs, e)
	}
	return evs
}

// rootOf is the session a row's cost belongs to: its parent, if any.
func rootOf(e *heraldpb.UsageEvent) string {
	if p := e.GetParentSessionId(); p != "" {
		return p
	}
	return e.GetSessionId()
}

// wantByRoot sums the rows' cost and calls per root session, within since.
func wantByRoot(evs []*heraldpb.UsageEvent, now time.Time, since time.Duration) map[string][2]uint64 {
	from := now.Add(-since).Truncate(time.Second)
	out := map[string][2]uint64{}
	for _, e := range evs {
		if since > 0 && eventTime(e.GetTsUnixMs()).Before(from) {
			continue
		}
		w := out[rootOf(e)]
		out[rootOf(e)] = [2]uint64{w[0] + e.GetCostNanoUsd(), w[1] + 1}
	}
	return out
}

func TestParentSessionCostIncludesItsSubagentsEverywhere(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	ctx := context.Background()
	now := time.Now()

	// Rows an older release stored, before session_roots existed (004).
	st, err := openStore(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.migrateUpTo(ctx, 3)
	require.NoError(t, err)
	old := familyRows("old-", now)
	var rows []row
	for _, e := range old {
		rows = append(rows, row{id: e.EventId, ev: e})
	}
	_, err = st.insertNew(ctx, usageKindBefore006(), rows)
	require.NoError(t, err)

	// The service migrates (004 maps the old children), then sinks new rows.
	svc := startService(t, b, testConfig(dsn))
	fresh := familyRows("new-", now)
	publishUsage(t, b.JS, "", fresh...)
	waitDrained(t, b.JS, bus.StreamUsage)
	all := append(old, fresh...)

	for _, since := range []time.Duration{0, 90 * time.Minute} {
		want := wantByRoot(all, now, since)
		rep, err := st.queryCost(ctx, CostQuery{By: "session", Since: since}, now)
		require.NoError(t, err)
		got := map[string][2]uint64{}
		for _, r := range rep.Rows {
			got[r.Key] = [2]uint64{r.CostNanoUSD, r.Calls}
		}
		require.Equal(t, want, got, "--by session --since %s: one row per root session, subagents included", since)

		for _, parent := range []string{"old-p1", "new-p1", "new-p2"} {
			rep, err := st.queryCost(ctx, CostQuery{By: "model", Session: parent, Since: since}, now)
			require.NoError(t, err)
			require.Equal(t, want[parent][0], rep.Total.CostNanoUSD, "--session %s --since %s", parent, since)
			require.Equal(t, want[parent][1], rep.Total.Calls, "--session %s --since %s", parent, since)
		}
	}
	rep, err := st.queryCost(ctx, CostQuery{By: "purpose", Session: "new-p1"}, now)
	require.NoError(t, err)
	require.Equal(t, []string{"new-p1-c1", "new-p1-c2"}, rep.Subagents)
	require.Len(t, rep.Rows, 2, "agent and subagent rows")

	// A child asked for alone is just itself.
	child, err := st.queryCost(ctx, CostQuery{By: "model", Session: "new-p1-c1"}, now)
	require.NoError(t, err)
	require.Empty(t, child.Subagents)
	require.Equal(t, uint64(5), child.Total.Calls)
	childBySession, err := st.queryCost(ctx, CostQuery{By: "session", Session: "new-p1-c1"}, now)
	require.NoError(t, err)
	require.Len(t, childBySession.Rows, 1)
	require.Equal(t, "new-p1-c1", childBySession.Rows[0].Key, "a child asked for alone is keyed by itself, not its parent")
	require.Equal(t, child.Total, childBySession.Total)
	parentBySession, err := st.queryCost(ctx, CostQuery{By: "session", Session: "new-p2"}, now)
	require.NoError(t, err)
	require.Len(t, parentBySession.Rows, 1)
	require.Equal(t, wantByRoot(all, now, 0)["new-p2"][0], parentBySession.Rows[0].CostNanoUSD)

	// The dashboard: session page and top sessions give the same figure.
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	var det SessionDetail
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/sessions/old-p1", &det))
	require.Equal(t, wantByRoot(all, now, 0)["old-p1"][0], det.Total.CostNanoUSD)
	require.Equal(t, []string{"old-p1-c1", "old-p1-c2"}, det.Subagents)
	require.Len(t, det.Steps, 15)
	bySession := map[string]int{}
	for _, s := range det.Steps {
		bySession[s.SessionID]++
	}
	require.Equal(t, map[string]int{"old-p1": 5, "old-p1-c1": 5, "old-p1-c2": 5}, bySession)

	page, err := http.Get(srv.URL + "/sessions/old-p1")
	require.NoError(t, err)
	body, err := io.ReadAll(page.Body)
	page.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), fmt.Sprintf(`data-cost-nano-usd="%d"`, det.Total.CostNanoUSD), "the page shows the family's total")
	require.Regexp(t, `id="subagents">Includes 2 subagent session\(s\): <span class="key">old-p1-c1</span>, <span class="key">old-p1-c2</span>`, string(body))

	var ov Overview
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/overview?range=all", &ov))
	want := wantByRoot(all, now, 0)
	require.Len(t, ov.Sessions, len(want), "children are not top sessions of their own")
	for _, s := range ov.Sessions {
		require.Equal(t, want[s.Key][0], s.CostNanoUSD, s.Key)
	}
}
