package e2e

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/stretchr/testify/require"
)

// The dashboard's trace page shows a real session: every model attempt and
// tool run on one timeline, in the order they happened, with the answers,
// tool arguments and results, retries and the fallback marked.
func TestSessionTracePageInHeadlessChromium(t *testing.T) {
	h := Start(t, tracedScript(), WithClickHouse(t), WithConfig(func(c *config.Config) {
		c.FallbackProviders = []config.Provider{{Provider: "openai", Model: "backup", BaseURL: c.Primary.BaseURL}}
		c.Pricing["backup"] = config.Price{Input: 3, Output: 6}
	}))
	task := NewTask("write traced.txt, read it back and tell me what it says")
	require.Equal(t, proto.ExitTextResponse, h.Run(task).ExitReason)

	d := accounting.NewDashboard(h.Config.ClickHouseDSN, "", heraldtest.Logger(t))
	d.SetTranscripts(app.Transcripts(h.JS)) // as herald up wires it
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	var tr accounting.SessionTrace
	require.Eventually(t, func() bool {
		tr = accounting.SessionTrace{}
		resp, err := http.Get(srv.URL + "/api/sessions/" + task.SessionID + "/trace")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&tr) == nil && countKinds(tr)["model"] == 10 && countKinds(tr)["tool"] == 3
	}, 30*time.Second, 100*time.Millisecond, "the session's attempts and tool runs never all reached ClickHouse")
	require.Empty(t, tr.Transcript, "the transcript was read")

	shot := filepath.Join(artifacts(t), "session-trace.png")
	dom := chromium(t, srv.URL+"/sessions/"+task.SessionID+"/trace", shot)
	require.Equal(t, 13, strings.Count(dom, `class="span-row `), "one row per attempt and tool run")
	require.Equal(t, 5, strings.Count(dom, `class="tag retry"`), "every retry is marked: one in each of three steps, two of the overloaded primary before its fallback")
	require.Equal(t, 1, strings.Count(dom, `class="tag fallback"`), "the fallback is marked")
	require.Equal(t, 6, strings.Count(dom, `class="tag error"`), "the six failed attempts are marked")
	require.Contains(t, dom, "execute_tool write_file")
	require.Regexp(t, `arguments:<pre>\{"(content":"seen from outside","path":"traced.txt|path":"traced.txt","content":"seen from outside)"\}</pre>`, dom, "tool arguments")
	require.Contains(t, dom, "wrote 17 bytes", "tool results")
	require.Contains(t, dom, "the file says: seen from outside", "the final answer")
	require.Contains(t, dom, "write traced.txt, read it back", "the turn's prompt")

	bars := timelineBars(t, shot)
	require.Len(t, bars, 13, "a bar per row on the timeline (screenshot %s)", shot)
	for i := 1; i < len(bars); i++ {
		require.GreaterOrEqual(t, bars[i].Min.X, bars[i-1].Min.X, "each row starts no earlier than the one above it")
		require.Greater(t, bars[i].Min.Y, bars[i-1].Max.Y, "rows do not overlap")
	}
	require.Greater(t, bars[len(bars)-1].Min.X, bars[0].Min.X+100, "the timeline spreads the session across the page")
	colors := map[string]int{}
	for _, b := range bars {
		colors[b.kind]++
	}
	require.Equal(t, map[string]int{"model": 4, "failed": 6, "tool": 3}, colors)
	t.Logf("session trace screenshot: %s", shot)
}

func countKinds(tr accounting.SessionTrace) map[string]int {
	n := map[string]int{}
	for _, turn := range tr.Turns {
		for _, sp := range turn.Spans {
			n[sp.Kind]++
		}
	}
	return n
}

// bar is one timeline bar found in a screenshot.
type bar struct {
	image.Rectangle
	kind string
}

// The bar colours of web/session_trace.html.
var barColors = map[color.RGBA]string{
	{0x4e, 0x79, 0xa7, 0xff}: "model",
	{0x59, 0xa1, 0x4f, 0xff}: "tool",
	{0xe1, 0x57, 0x59, 0xff}: "failed",
}

// timelineBars finds the bars in a screenshot: runs of rows holding a
// horizontal stretch of one bar colour at least 3 pixels wide.
func timelineBars(t *testing.T, shot string) []bar {
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	var bars []bar
	var cur *bar
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row, kind, found := image.Rectangle{}, "", false
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			k, ok := barColors[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 0xff}]
			if !ok {
				continue
			}
			if !found {
				row, kind, found = image.Rect(x, y, x+1, y+1), k, true
			}
			row.Max.X = x + 1
		}
		if !found || row.Dx() < 3 {
			if cur != nil {
				bars, cur = append(bars, *cur), nil
			}
			continue
		}
		if cur == nil {
			cur = &bar{Rectangle: row, kind: kind}
		}
		cur.Max.Y = y + 1
		cur.Min.X, cur.Max.X = min(cur.Min.X, row.Min.X), max(cur.Max.X, row.Max.X)
	}
	if cur != nil {
		bars = append(bars, *cur)
	}
	var out []bar
	for _, b := range bars {
		if b.Dy() >= 8 { // a bar, not a stray line of text in the same colour
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Min.Y < out[j].Min.Y })
	return out
}

// chromium loads url headless, saves a screenshot to shot and returns the
// DOM (the page has no scripts).
func chromium(t *testing.T, url, shot string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		bin, err = exec.LookPath("chromium-browser")
	}
	require.NoError(t, err, "the trace page test needs Debian's chromium: apt-get install -y chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--no-first-run", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--user-data-dir="+t.TempDir(), "--window-size=1280,1600", "--screenshot="+shot, "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	return string(out)
}

func artifacts(t *testing.T) string {
	dir := os.Getenv("HERALD_ARTIFACTS_DIR") // as the accounting browser test
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "herald-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}
