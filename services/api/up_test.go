package api_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// `herald up` started as a user starts it, from a fresh folder with no
// flags, serves the api on the dashboard's address: the addresses come from
// the environment (HERALD_NATS_URL, HERALD_HTTP_ADDR) only so that the test
// does not take 4222 and 8080 on a shared machine.
func TestUpFromAFreshFolderServesTheAPIWithDefaultFlags(t *testing.T) {
	model, err := scripted.Start(script)
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	h := &instance{dir: dir, model: model, NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	h.URL = "http://" + addr
	h.env = []string{
		"PATH=" + pathWithout("clickhouse-server"), "HOME=" + os.Getenv("HOME"),
		"HERALD_NATS_URL=" + h.NATSURL, "HERALD_HTTP_ADDR=" + addr,
		"HERALD_BASE_URL=" + model.URL, "HERALD_MODEL=test-model", "HERALD_API_KEY=test", "HERALD_SANDBOX=none",
	}
	h.start(t, "up")
	waitHTTP(t, h.URL)
	var resp struct {
		Status string `json:"status"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	r := call(t, "POST", h.URL+"/v1/responses", "", map[string]any{"model": "herald", "input": "say: Up and serving."}, &resp)
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Equal(t, "completed", resp.Status)
	require.Equal(t, "Up and serving.", resp.Output[len(resp.Output)-1].Content[0].Text)
	require.DirExists(t, filepath.Join(dir, ".herald"), "its data is in the folder it was started from")
}
