package accounting

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The dashboard's sessions page lists every session of the range and finds
// one by part of its id; a model without a price is flagged, not shown as
// $0; /healthz answers without the token.
func TestDashboardSessionsListSearchAndUnpricedInHeadlessChromium(t *testing.T) {
	const token = "s3cret-dashboard-token"
	f := startDashboardFixture(t, token)
	ctx := context.Background()
	st, err := openExisting(ctx, f.dsn)
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.conn.Exec(ctx, `INSERT INTO usage_events (event_id, ts, tenant, session_id, purpose, provider, model,
		input_tokens, output_tokens, cost_nano_usd, price_source, status)
		SELECT 'unpriced-1', now(), 'acme', 'sess-unpriced', 'agent', 'openai', 'model-without-price',
		toUInt64(500), toUInt64(50), toUInt64(0), 'unknown', 'ok'`))

	resp, err := http.Get(f.url + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "no token needed for the health route")
	var h Health
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	require.Equal(t, Health{Status: "ok", ClickHouse: "ok"}, h)
	resp, err = http.Get(f.url + "/sessions")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the sessions page needs the token")

	dir := artifactsDir(t)
	all := chromium(t, f.url+"/sessions?range=all&token="+token, filepath.Join(dir, "dashboard-sessions.png"))
	rows := regexp.MustCompile(`<a href="sessions/(sess-[a-z0-9]+)">`).FindAllStringSubmatch(all, -1)
	var ids []string
	for _, m := range rows {
		ids = append(ids, m[1])
	}
	require.ElementsMatch(t, []string{"sess-0", "sess-1", "sess-2", "sess-3", "sess-4", "sess-unpriced"}, ids)
	require.Regexp(t, `sess-unpriced</a></td><td>1</td><td>0</td><td>500 / 50</td><td>n/a</td><td>1</td>`, all,
		"an unpriced session's cost is n/a with its unpriced call counted")

	found := chromium(t, f.url+"/sessions?range=all&q=SESS-3&token="+token, filepath.Join(dir, "dashboard-sessions-search.png"))
	require.Contains(t, found, `matching “SESS-3”`)
	require.Len(t, regexp.MustCompile(`<a href="sessions/sess-[a-z0-9]+">`).FindAllString(found, -1), 1)
	require.Contains(t, found, `<a href="sessions/sess-3">`)

	overview := chromium(t, f.url+"/?range=all&token="+token, filepath.Join(dir, "dashboard-unpriced.png"))
	require.Regexp(t, `model-without-price</td>.*<td class="cost">n/a</td><td class="unpriced">⚠ 1 unpriced</td>`, overview)
	require.Contains(t, overview, `id="all-sessions"`)
}
