package compressor

import (
	"context"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestLifecycleIsSafeTwiceAndWithoutStart(t *testing.T) {
	b := heraldtest.StartBus(t)
	s, err := New(DefaultConfig(), service.Deps{NC: b.NC, JS: b.JS, Log: heraldtest.Logger(t)})
	require.NoError(t, err)
	require.Equal(t, "compressor", s.Name())
	require.NoError(t, s.Shutdown(context.Background()))
	require.NoError(t, s.Shutdown(context.Background()))

	started := startService(t, b, DefaultConfig())
	require.NoError(t, started.Shutdown(context.Background()))
	require.NoError(t, started.Shutdown(context.Background()))
}

func TestConfigFollowsHeraldYAML(t *testing.T) {
	global := config.Default()
	global.Compression.ProtectFirstN, global.Compression.ProtectLastN = 2, 12
	global.Compression.Threshold, global.Compression.TargetRatio = 0.7, 0.3
	global.ContextWindows = map[string]int{"my-model": 9000}
	cfg := ConfigFrom(global)
	require.NoError(t, cfg.Validate())
	require.Equal(t, 2, cfg.ProtectFirstN)
	require.Equal(t, 12, cfg.ProtectLastN)
	require.InDelta(t, 0.7, cfg.Threshold, 1e-9)
	c := &compressor{cfg: cfg}
	require.EqualValues(t, 9000, c.window(&heraldpb.CompressRequest{Model: "my-model"}), "config overrides the built-in table")
	require.EqualValues(t, 5000, c.window(&heraldpb.CompressRequest{Model: "my-model", ContextWindow: 5000}), "the request wins")

	bad := DefaultConfig()
	bad.Threshold = 1.5
	_, err := New(bad, service.Deps{})
	require.ErrorContains(t, err, "threshold")
}
