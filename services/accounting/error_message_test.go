package accounting

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

// A failed attempt's message (what the provider said) is stored with its
// usage event and shown beside its class on the session page, the trace
// and `herald insights`; markup in it is shown, never run.
func TestFailedAttemptMessageIsStoredAndShownBesideItsClass(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	svc := startService(t, b, testConfig(dsn))
	now := time.Now()

	const msg = `HTTP 500: The server had an error while processing your request. <script>alert("x")</script>`
	failed := usageEvent("em-1", "acme", "sess-em", "gpt-4o", now.Add(-2*time.Second), 0, 0, 0)
	failed.Status, failed.ErrorClass, failed.ErrorMessage = "error", "server_error", msg
	// An event from elsewhere with an oversized message: stored cut to 500
	// bytes without splitting a character.
	long := usageEvent("em-2", "acme", "sess-em", "gpt-4o", now.Add(-time.Second), 0, 0, 0)
	long.Status, long.ErrorClass, long.Attempt = "error", "overloaded", 2
	long.ErrorMessage = "x" + strings.Repeat("ü", 400) // 801 bytes
	ok := usageEvent("em-3", "acme", "sess-em", "gpt-4o", now, 100, 10, 5000)
	ok.Attempt = 3
	publishUsage(t, b.JS, "", failed, long, ok)
	waitDrained(t, b.JS, bus.StreamUsage)

	ctx := context.Background()
	st, err := openExisting(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	stored := map[string]string{}
	rows, err := st.conn.Query(ctx, "SELECT event_id, error_message FROM usage_events WHERE session_id = 'sess-em'")
	require.NoError(t, err)
	for rows.Next() {
		var id, m string
		require.NoError(t, rows.Scan(&id, &m))
		stored[id] = m
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Equal(t, msg, stored["em-1"])
	require.Empty(t, stored["em-3"], "a served attempt has no message")
	require.LessOrEqual(t, len(stored["em-2"]), maxErrorMessage)
	require.Equal(t, maxErrorMessage-1, len(stored["em-2"]), "499 bytes: the 500th would split a ü")
	require.True(t, utf8.ValidString(stored["em-2"]))
	require.True(t, strings.HasPrefix(stored["em-2"], "xüü"))

	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	var det SessionDetail
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/sessions/sess-em", &det))
	require.Len(t, det.Steps, 3)
	require.Equal(t, "server_error", det.Steps[0].ErrorClass)
	require.Equal(t, msg, det.Steps[0].ErrorMessage)
	require.Empty(t, det.Steps[2].ErrorMessage)

	escaped := html.EscapeString(msg)
	page := getPage(t, srv.URL+"/sessions/sess-em")
	require.Contains(t, page, `error (server_error)<div class="errmsg">`+escaped+`</div>`, "the message sits beside its class")
	require.NotContains(t, page, `<script>alert`, "the provider's words are text, not markup")

	// As a browser shows it: the message is text in the step's status cell.
	shot := filepath.Join(artifactsDir(t), "dashboard-session-error-message.png")
	dom := chromium(t, srv.URL+"/sessions/sess-em", shot)
	require.Contains(t, dom, `<div class="errmsg">HTTP 500: The server had an error while processing your request. &lt;script&gt;alert("x")&lt;/script&gt;</div>`)
	require.NotContains(t, dom, `<script>alert`)
	t.Logf("session page screenshot: %s", shot)

	trace := getPage(t, srv.URL+"/sessions/sess-em/trace")
	require.Contains(t, trace, `<div class="errmsg">server_error: `+escaped+`</div>`)
	require.NotContains(t, trace, `<script>alert`)

	in, err := QueryInsights(ctx, dsn, time.Hour)
	require.NoError(t, err)
	last := map[string]string{}
	for _, e := range in.Errors {
		last[e.Class] = e.LastMessage
	}
	require.Equal(t, msg, last["server_error"])
	var text strings.Builder
	require.NoError(t, in.WriteText(&text))
	require.Contains(t, text.String(), "LAST MESSAGE")
	require.Contains(t, text.String(), "HTTP 500: The server had an error")
}

// Migration 006 adds the column to a database an older release left, its
// rows reading an empty message; a process that finds the column already added (a
// second one migrating at the same time) counts the migration as done.
func TestErrorMessageMigrationOnAnOlderDatabase(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	st, err := openStore(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.migrateUpTo(ctx, 5)
	require.NoError(t, err)
	require.NoError(t, st.conn.Exec(ctx, `INSERT INTO usage_events (event_id, ts, tenant, session_id, purpose, provider, model, status, error_class)
		SELECT 'old-1', now(), 'acme', 'sess-old', 'agent', 'openai', 'gpt-4o', 'error', 'server_error'`))
	// Another process added the column and has not recorded it yet.
	require.NoError(t, st.conn.Exec(ctx, "ALTER TABLE usage_events ADD COLUMN error_message String DEFAULT '' AFTER error_class"))

	applied, err := st.migrateUpTo(ctx, 6)
	require.NoError(t, err)
	require.Equal(t, []int{6}, applied)
	var m string
	require.NoError(t, st.conn.QueryRow(ctx, "SELECT error_message FROM usage_events WHERE event_id = 'old-1'").Scan(&m))
	require.Empty(t, m)

	// Only "already there" is taken as done: any other failure of an
	// ALTER stops the migration.
	err = st.conn.Exec(ctx, "ALTER TABLE no_such_table ADD COLUMN x String DEFAULT ''")
	require.Error(t, err)
	require.False(t, columnExists("ALTER TABLE no_such_table ADD COLUMN x String DEFAULT ''", err))
}

// usageKindBefore006 stores usage rows as a release before migration 006
// did: without error_message.
func usageKindBefore006() eventKind {
	k := usageKind
	i := slices.Index(k.columns, "error_message")
	k.columns = slices.Delete(slices.Clone(k.columns), i, i+1)
	k.toColumns = func(rows []row) []any { return slices.Delete(usageKind.toColumns(rows), i, i+1) }
	return k
}
