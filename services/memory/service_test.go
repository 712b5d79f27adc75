package memory

import (
	"context"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/stretchr/testify/require"
)

func TestLifecycleIsSafeTwiceAndWithoutStart(t *testing.T) {
	b := heraldtest.StartBus(t)
	s, err := New(testConfig(t), service.Deps{NC: b.NC, JS: b.JS, Log: heraldtest.Logger(t)})
	require.NoError(t, err)
	require.Equal(t, "memory", s.Name())
	require.NoError(t, s.Shutdown(context.Background()))
	require.NoError(t, s.Shutdown(context.Background()))

	started := startService(t, b, testConfig(t), "mem-1")
	require.NoError(t, started.Shutdown(context.Background()))
	require.NoError(t, started.Shutdown(context.Background()))
}

func TestConfigIsValidatedAtStart(t *testing.T) {
	b := heraldtest.StartBus(t)
	cfg := DefaultConfig()
	cfg.UserLimit = 0
	_, err := New(cfg, service.Deps{NC: b.NC, JS: b.JS})
	require.ErrorContains(t, err, "limits must be positive")

	global := config.Default()
	global.DataDir = "/var/lib/herald"
	derived := ConfigFrom(global)
	require.NoError(t, derived.Validate())
	require.Equal(t, "/var/lib/herald/memory/session-index.gob", derived.IndexPath)
	require.Equal(t, 2200, derived.MemoryLimit)
	require.Equal(t, 1375, derived.UserLimit)
}
