package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// sessionsScript answers a session_search request with the tool, and any
// other message by echoing how many answers the session held.
func sessionsScript(r *scripted.Request) scripted.Reply {
	last := r.LastMessage()
	if last.Role == "tool" {
		return scripted.Text("search done")
	}
	if strings.Contains(last.Text(), "search for") {
		return scripted.Tool("session_search", `{"query":"pineapple"}`)
	}
	return scripted.Text(fmt.Sprintf("noted; %d answers before", r.AssistantCount()))
}

func runJSON(t *testing.T, dir string, env map[string]string, args ...string) proto.Result {
	t.Helper()
	out, code := runHeraldIn(t, dir, env, append([]string{"run", "--json"}, args...)...)
	require.Equal(t, 0, code, out)
	var res proto.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res
}

// -c continues the workspace's last session; export writes a session as
// JSONL or Markdown; delete removes transcript, state and search entries but
// keeps the cost rows; prune deletes sessions idle for longer than asked.
func TestSessionsContinueExportDeletePrune(t *testing.T) {
	model, err := scripted.Start(sessionsScript)
	require.NoError(t, err)
	defer model.Close()
	dsn := freshClickHouse(t)
	dir := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini", "HERALD_CLICKHOUSE_DSN": dsn}

	out, code := runHeraldIn(t, dir, env, "run", "-c", "nothing yet")
	require.Equal(t, 1, code)
	require.Contains(t, out, "no earlier session in this workspace")

	a := runJSON(t, dir, env, "remember the pineapple")
	cont := runJSON(t, dir, env, "-c", "and the pear")
	require.Equal(t, a.SessionID, cont.SessionID, "-c continues the last session")
	require.Equal(t, "noted; 1 answers before", cont.FinalResponse)
	b := runJSON(t, dir, env, "a new topic: bananas")
	require.NotEqual(t, a.SessionID, b.SessionID)
	require.Equal(t, b.SessionID, runJSON(t, dir, env, "--continue", "more bananas").SessionID, "the most recent one")
	out, code = runHeraldIn(t, dir, env, "run", "-c", "--session", a.SessionID, "x")
	require.Equal(t, 2, code, out)

	jsonl, code := runHeraldIn(t, dir, env, "sessions", "export", a.SessionID)
	require.Equal(t, 0, code, jsonl)
	require.Contains(t, jsonl, "exported session "+a.SessionID+": 5 messages as jsonl")
	sc := bufio.NewScanner(strings.NewReader(jsonl))
	var kinds []string
	var texts []string
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue // the confirmation on stderr
		}
		kinds = append(kinds, line["type"].(string))
		if c, ok := line["content"].(string); ok {
			texts = append(texts, c)
		}
	}
	require.Equal(t, []string{"session", "message", "message", "message", "message", "message"}, kinds)
	require.Contains(t, texts, "remember the pineapple")
	require.Contains(t, texts, "noted; 1 answers before")
	md, code := runHeraldIn(t, dir, env, "sessions", "export", a.SessionID, "--format", "md")
	require.Equal(t, 0, code, md)
	require.Contains(t, md, "# Session "+a.SessionID)
	require.Contains(t, md, "## User\n\nremember the pineapple")
	require.Contains(t, md, "## Assistant\n\nnoted; 0 answers before")
	_, code = runHeraldIn(t, dir, env, "sessions", "export", a.SessionID, "--format", "pdf")
	require.Equal(t, 1, code)

	found, code := runHeraldIn(t, dir, env, "sessions", "search", "pineapple")
	require.Equal(t, 0, code, found)
	require.Contains(t, found, a.SessionID)

	editSession(t, dir, a.SessionID, func(st map[string]any) { st["status"] = "thinking" })
	out, code = runHeraldIn(t, dir, env, "sessions", "delete", a.SessionID)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "is running a turn (thinking): interrupt it first")
	editSession(t, dir, a.SessionID, func(st map[string]any) { st["status"] = "idle" })
	// A workspace snapshot as a tool runner with checkpoints on leaves it.
	snapshot := filepath.Join(dir, ".herald", "checkpoints", a.SessionID, "step-000001")
	writeFile(t, filepath.Join(snapshot, "notes.txt"), "before the edit")
	out, code = runHeraldIn(t, dir, env, "sessions", "delete", a.SessionID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "1 checkpoints")
	require.NoDirExists(t, filepath.Dir(snapshot))
	require.Contains(t, out, "deleted session "+a.SessionID+": 5 transcript entries, 2 results")
	require.Contains(t, out, "its state, its search-index entries (cost rows in ClickHouse are kept)")
	out, code = runHeraldIn(t, dir, env, "sessions", "show", a.SessionID)
	require.Equal(t, 1, code)
	require.Contains(t, out, "no session")
	out, code = runHeraldIn(t, dir, env, "sessions", "delete", a.SessionID)
	require.Equal(t, 1, code, "a second delete finds nothing: %s", out)
	found, _ = runHeraldIn(t, dir, env, "sessions", "search", "pineapple")
	require.NotContains(t, found, a.SessionID)
	list, _ := runHeraldIn(t, dir, env, "sessions", "list")
	require.NotContains(t, list, a.SessionID)
	require.Contains(t, list, b.SessionID)

	// The memory service of the next run starts from its saved index, which
	// held the session: the tombstone makes it forget it.
	searched := runJSON(t, dir, env, "search for the fruit")
	msgs := lastToolResult(t, model)
	require.NotContains(t, msgs, a.SessionID, "session_search no longer finds the deleted session")
	require.Equal(t, "search done", searched.FinalResponse)

	require.Eventually(t, func() bool {
		rep, err := accounting.QueryCost(context.Background(), dsn, accounting.CostQuery{By: "session", Session: a.SessionID})
		return err == nil && rep.Total.Calls == 2
	}, time.Minute, 200*time.Millisecond, "the deleted session's cost rows stay in ClickHouse")

	out, code = runHeraldIn(t, dir, env, "sessions", "prune")
	require.Equal(t, 2, code, out)
	ageSession(t, dir, b.SessionID, 40*24*time.Hour)
	out, code = runHeraldIn(t, dir, env, "sessions", "prune", "--older-than", "30d", "--dry-run")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "would delete session "+b.SessionID)
	require.NotContains(t, out, searched.SessionID)
	out, code = runHeraldIn(t, dir, env, "sessions", "prune", "--older-than", "30d")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "deleted session "+b.SessionID)
	require.Contains(t, out, "deleted 1 sessions whose last turn is older than 30d")
	list, _ = runHeraldIn(t, dir, env, "sessions", "list")
	require.NotContains(t, list, b.SessionID)
	require.Contains(t, list, searched.SessionID, "a recent session is kept")

	out, code = runHeraldIn(t, dir, env, "sessions", "delete", searched.SessionID)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `deleted session \S+: 5 transcript entries, 1 results, \d+ events, 1 tool results, 2 model responses`, out,
		"a session that ran a tool loses its tool results and model responses too")
}

func lastToolResult(t *testing.T, model *scripted.Server) string {
	reqs := model.Requests()
	last := reqs[len(reqs)-1].LastMessage()
	require.Equal(t, "tool", last.Role)
	return last.Text()
}

// ageSession moves a session's last turn back by age, in the state store
// `herald run` left in dir, so prune sees an old session.
func ageSession(t *testing.T, dir, sid string, age time.Duration) {
	t.Helper()
	editSession(t, dir, sid, func(st map[string]any) { st["turn_started_ms"] = time.Now().Add(-age).UnixMilli() })
}

// editSession changes a session's state record in the store `herald run`
// left in dir.
func editSession(t *testing.T, dir, sid string, edit func(map[string]any)) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{StoreDir: filepath.Join(dir, ".herald", "nats"), Log: zerolog.Nop()})
	require.NoError(t, err)
	defer srv.Shutdown()
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	e, err := kv.Get(ctx, sid)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(e.Value(), &st))
	edit(st)
	data, err := json.Marshal(st)
	require.NoError(t, err)
	_, err = kv.Update(ctx, sid, data, e.Revision())
	require.NoError(t, err)
}
