package api_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// stack is a NATS server the test owns (so it can stop and restart it on
// the same store) with Herald's services run beside it as `herald serve`
// processes, started by the test one group at a time.
type stack struct {
	*instance
	store string
	nats  *embedded.Server
}

func startStack(t *testing.T) *stack {
	t.Helper()
	model, err := scripted.Start(script)
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	s := &stack{instance: &instance{dir: dir, model: model, NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)),
		URL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}, store: filepath.Join(dir, "nats")}
	cfgPath := filepath.Join(dir, "herald.yaml")
	require.NoError(t, os.WriteFile(cfgPath, nil, 0o600))
	s.env = []string{
		"PATH=" + pathWithout("clickhouse-server"), "HOME=" + os.Getenv("HOME"),
		"HERALD_NATS_URL=" + s.NATSURL, "HERALD_BASE_URL=" + model.URL, "HERALD_MODEL=test-model",
		"HERALD_API_KEY=test", "HERALD_CONFIG=" + cfgPath, "HERALD_DATA_DIR=" + filepath.Join(dir, "data"),
		"HERALD_SANDBOX=none", "HERALD_LOG_LEVEL=warn",
	}
	s.startNATS(t)
	t.Cleanup(func() { s.nats.Shutdown() })
	return s
}

// startNATS starts (or starts again) the server on the stack's store and port.
func (s *stack) startNATS(t *testing.T) {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{StoreDir: s.store, Listen: strings.TrimPrefix(s.NATSURL, "nats://"), Log: zerolog.Nop()})
	require.NoError(t, err)
	s.nats = srv
}

// serveAPI starts `herald serve api` on the stack's URL and waits for it.
func (s *stack) serveAPI(t *testing.T) {
	t.Helper()
	s.start(t, "serve", "api", "--listen", strings.TrimPrefix(s.URL, "http://"))
	waitHTTP(t, s.URL)
}
