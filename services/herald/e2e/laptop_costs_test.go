package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/stretchr/testify/require"
)

// On a laptop with clickhouse-server installed and nothing configured, a
// plain herald run keeps its costs in the user's private ClickHouse, and
// herald cost and insights read them from any folder of the same user;
// doctor does not ask to install what is installed.
func TestRunCostsReachThePrivateClickHouseFromAnyFolder(t *testing.T) {
	model, err := scripted.Start(scripted.Conversation(scripted.Text("an answer")))
	require.NoError(t, err)
	defer model.Close()
	state := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini",
		"HERALD_PRIVATE_CLICKHOUSE": "", "XDG_STATE_HOME": state}
	project := t.TempDir()
	out, code := runHeraldIn(t, project, env, "run", "hello")
	require.Equal(t, 0, code, out)

	data, err := os.ReadFile(filepath.Join(state, "herald", "clickhouse.json"))
	require.NoError(t, err, "the private ClickHouse is recorded for the user")
	var rec struct{ DSN, Dir string }
	require.NoError(t, json.Unmarshal(data, &rec))
	require.Equal(t, filepath.Join(project, ".herald", "clickhouse"), rec.Dir)

	elsewhere := t.TempDir()
	var rep accounting.CostReport
	require.Eventually(t, func() bool {
		out, code := runHeraldIn(t, elsewhere, env, "cost", "--json")
		rep = accounting.CostReport{}
		if code != 0 {
			t.Logf("herald cost: %s", out)
			// usage reaches ClickHouse with the next run in the project
			_, _ = runHeraldIn(t, project, env, "run", "hello again")
		}
		return code == 0 && json.Unmarshal([]byte(out), &rep) == nil && rep.Total.Calls >= 1
	}, 2*time.Minute, time.Second, "herald cost from another folder never saw the run")
	require.Equal(t, "gpt-4o-mini", rep.Rows[0].Key)
	require.Positive(t, rep.Total.CostUSD)

	out, code = runHeraldIn(t, elsewhere, env, "insights", "--json")
	require.Equal(t, 0, code, out)

	doctor, _ := runHeraldIn(t, elsewhere, env, "doctor")
	for _, line := range strings.Split(doctor, "\n") {
		if strings.Contains(line, "clickhouse") {
			require.NotContains(t, line, "install clickhouse-server", "doctor asks to install what is installed:\n%s", doctor)
		}
	}

	noCH := map[string]string{"XDG_STATE_HOME": t.TempDir(), "PATH": "/nonexistent"}
	out, code = runHeraldIn(t, t.TempDir(), noCH, "cost")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "export HERALD_CLICKHOUSE_DSN=clickhouse://127.0.0.1:9000/herald", "the exact line to set")
}
