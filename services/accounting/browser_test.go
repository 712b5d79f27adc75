package accounting

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ArtifactsEnv names a folder where the browser test leaves its screenshots
// (default: <tmp>/herald-artifacts).
const ArtifactsEnv = "HERALD_ARTIFACTS_DIR"

// chromium loads url headless and returns the DOM after scripts ran (there
// are none) and saves a screenshot to shot.
func chromium(t *testing.T, url, shot string, flags ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		bin, err = exec.LookPath("chromium-browser")
	}
	require.NoError(t, err, "the dashboard test needs Debian's chromium: apt-get install -y chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1500", "--screenshot=" + shot, "--dump-dom"}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	return string(out)
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv(ArtifactsEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "herald-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

var costAttr = regexp.MustCompile(`id="(total-cost|session-cost)" data-cost-nano-usd="(\d+)"`)

func nanoIn(t *testing.T, dom, id string) uint64 {
	t.Helper()
	for _, m := range costAttr.FindAllStringSubmatch(dom, -1) {
		if m[1] == id {
			n, err := strconv.ParseUint(m[2], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no #%s in the page:\n%s", id, dom)
	return 0
}

func TestDashboardInHeadlessChromiumShowsTheTotalsOfHeraldCost(t *testing.T) {
	f := startDashboardFixture(t, "")
	dir := artifactsDir(t)
	ctx := context.Background()

	shot := filepath.Join(dir, "dashboard.png")
	dom := chromium(t, f.url+"/?range=24h", shot)
	want, err := QueryCost(ctx, f.dsn, CostQuery{By: "model", Since: 24 * time.Hour})
	require.NoError(t, err)
	require.Equal(t, want.Total.CostNanoUSD, nanoIn(t, dom, "total-cost"))
	require.Contains(t, dom, "$"+formatUSD(want.Total.CostNanoUSD), "the total is shown as herald cost prints it")
	require.Contains(t, dom, `id="spend-chart"`)
	require.GreaterOrEqual(t, strings.Count(dom, "<rect "), 10, "the chart has bars")
	for _, id := range []string{"top-sessions", "top-tenants", "by-purpose", "providers", "tools"} {
		require.Contains(t, dom, `id="`+id+`"`)
	}
	info, err := os.Stat(shot)
	require.NoError(t, err)
	require.Greater(t, info.Size(), int64(10_000), "a real screenshot")
	t.Logf("dashboard screenshot: %s", shot)

	shot = filepath.Join(dir, "dashboard-session.png")
	dom = chromium(t, f.url+"/sessions/sess-0", shot)
	wantSess, err := QueryCost(ctx, f.dsn, CostQuery{By: "session", Session: "sess-0"})
	require.NoError(t, err)
	require.Equal(t, wantSess.Total.CostNanoUSD, nanoIn(t, dom, "session-cost"))
	require.Len(t, regexp.MustCompile(`<td>(agent|compression|subagent)</td>`).FindAllString(dom, -1), 8, "one row per step")
	t.Logf("session page screenshot: %s", shot)
}

// A page of evil.test, whose name the browser resolves to 127.0.0.1 (as a
// DNS-rebinding attacker makes it), loads the loopback dashboard: it gets
// the refusal, not the figures; the same browser at localhost gets them.
func TestDashboardInHeadlessChromiumRefusesARebindingPage(t *testing.T) {
	f := startDashboardFixture(t, "")
	port := strings.TrimPrefix(f.url, "http://127.0.0.1:")
	dir := artifactsDir(t)
	rebind := "--host-resolver-rules=MAP evil.test 127.0.0.1"
	for _, path := range []string{"/", "/sessions/sess-0/trace"} {
		dom := chromium(t, "http://evil.test:"+port+path, filepath.Join(dir, "dashboard-rebinding.png"), rebind)
		require.Contains(t, dom, "answers requests for localhost only", path)
		require.NotContains(t, dom, "data-cost-nano-usd", path)
		require.NotContains(t, dom, "sess-0\"", path)
	}
	dom := chromium(t, "http://localhost:"+port+"/?range=24h", filepath.Join(dir, "dashboard-localhost.png"), rebind)
	require.Positive(t, nanoIn(t, dom, "total-cost"), "the dashboard answers its own name")
}
