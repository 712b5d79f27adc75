package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/stretchr/testify/require"
)

// needClickHouseServer fails a test of the private ClickHouse where
// clickhouse-server is not installed: .ci/run and scripts/setup.sh --test
// install it, so its absence is a broken setup, not a reason to skip.
func needClickHouseServer(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("clickhouse-server")
	require.NoError(t, err, "clickhouse-server is not on PATH: run scripts/setup.sh --test")
}

// A newcomer runs `make demo`, then the command its cost table names, in a
// fresh home with clickhouse-server installed and nothing configured. The
// demo's ClickHouse goes with its temporary folder and is never recorded as
// the user's, so herald cost says plainly there is nothing yet, and the
// user's first real run keeps its costs in the proper place.
func TestDemoLeavesTheUsersClickHouseAlone(t *testing.T) {
	needClickHouseServer(t)
	home, tmp, folder := t.TempDir(), t.TempDir(), t.TempDir()
	state := filepath.Join(home, ".local", "state")
	env := map[string]string{"HOME": home, "XDG_STATE_HOME": state, "TMPDIR": tmp, "HERALD_PRIVATE_CLICKHOUSE": ""}
	record := filepath.Join(state, "herald", "clickhouse.json")

	out, code := runHeraldIn(t, folder, env, "demo")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "read back from the demo's own ClickHouse (herald cost --by model prints this table for your own runs")
	require.Contains(t, out, "herald-demo", "the demo's cost table")
	require.NoFileExists(t, record, "the demo records no ClickHouse as the user's")
	requireNoDemoFolder(t, tmp)

	out, code = runHeraldIn(t, folder, env, "cost", "--by", "model")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "no costs recorded yet: the first herald run or herald up starts a private ClickHouse")
	requireNoDemoFolder(t, tmp)

	model, err := scripted.Start(scripted.Conversation(scripted.Text("an answer")))
	require.NoError(t, err)
	defer model.Close()
	env["HERALD_BASE_URL"], env["HERALD_MODEL"] = model.URL, "gpt-4o-mini"
	out, code = runHeraldIn(t, folder, env, "run", "hello")
	require.Equal(t, 0, code, out)
	require.Equal(t, filepath.Join(folder, ".herald", "clickhouse"), recordedCHDir(t, record))
	requireCostShowsARun(t, folder, env)
}

// A record left pointing at a folder since deleted (by an older herald
// demo) is never started empty: herald cost says what happened, and the
// next run starts a fresh ClickHouse under its own data folder.
func TestCostSaysTheRecordedClickHouseFolderIsGone(t *testing.T) {
	needClickHouseServer(t)
	home, folder := t.TempDir(), t.TempDir()
	state := filepath.Join(home, ".local", "state")
	gone := filepath.Join(t.TempDir(), "herald-demo-123", "clickhouse")
	record := filepath.Join(state, "herald", "clickhouse.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(record), 0o700))
	data := fmt.Sprintf(`{"dsn":"clickhouse://127.0.0.1:%d/herald","dir":%q}`, freePort(t), gone)
	require.NoError(t, os.WriteFile(record, []byte(data), 0o600))
	env := map[string]string{"HOME": home, "XDG_STATE_HOME": state, "HERALD_PRIVATE_CLICKHOUSE": ""}

	out, code := runHeraldIn(t, folder, env, "cost", "--by", "model")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "kept its data in "+gone+", which no longer exists")
	require.NoDirExists(t, gone, "the deleted folder is not recreated")

	model, err := scripted.Start(scripted.Conversation(scripted.Text("an answer")))
	require.NoError(t, err)
	defer model.Close()
	env["HERALD_BASE_URL"], env["HERALD_MODEL"] = model.URL, "gpt-4o-mini"
	out, code = runHeraldIn(t, folder, env, "run", "hello")
	require.Equal(t, 0, code, out)
	require.NoDirExists(t, gone)
	require.Equal(t, filepath.Join(folder, ".herald", "clickhouse"), recordedCHDir(t, record))
}

func requireNoDemoFolder(t *testing.T, tmp string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(tmp, "herald-demo-*"))
	require.NoError(t, err)
	require.Empty(t, left, "the demo's temporary folder is gone, and nothing brought it back")
}

func recordedCHDir(t *testing.T, record string) string {
	t.Helper()
	data, err := os.ReadFile(record)
	require.NoError(t, err, "the private ClickHouse is recorded for the user")
	var rec struct{ Dir string }
	require.NoError(t, json.Unmarshal(data, &rec))
	return rec.Dir
}

// requireCostShowsARun waits until herald cost in folder shows the run's
// model call: usage rows reach ClickHouse within the run's drain, or with
// the next run in the folder.
func requireCostShowsARun(t *testing.T, folder string, env map[string]string) {
	t.Helper()
	var rep accounting.CostReport
	require.Eventually(t, func() bool {
		out, code := runHeraldIn(t, folder, env, "cost", "--by", "model", "--json")
		rep = accounting.CostReport{}
		if code != 0 {
			t.Logf("herald cost: %s", out)
			_, _ = runHeraldIn(t, folder, env, "run", "hello again")
		}
		return code == 0 && json.Unmarshal([]byte(out), &rep) == nil && rep.Total.Calls >= 1
	}, 2*time.Minute, time.Second, "herald cost never saw the run")
	require.Equal(t, "gpt-4o-mini", rep.Rows[0].Key)
}
