package toolrunner

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// BenchmarkCommandSandbox is what the sandbox adds to one command: `true`
// through runCommand with sandbox mode none and with bwrap (plus the
// per-call cgroup where the runner may create one), and with bwrap but no
// cgroup, as an unprivileged runner has.
//
//	go test -run '^$' -bench CommandSandbox -benchtime 50x ./services/toolrunner
func BenchmarkCommandSandbox(b *testing.B) {
	for _, mode := range []string{config.SandboxNone, config.SandboxBwrap, "bwrap-rlimits-only"} {
		b.Run(mode, func(b *testing.B) {
			cfg := config.DefaultSandbox()
			cfg.Mode = mode
			if mode == "bwrap-rlimits-only" {
				cfg.Mode = config.SandboxBwrap
			}
			sb, err := NewSandbox(cfg, zerolog.Nop())
			require.NoError(b, err)
			b.Cleanup(sb.close)
			if mode == "bwrap-rlimits-only" {
				sb.limits.close()
				sb.limits = nil // as an unprivileged runner, which makes no cgroup
			}
			s := &Service{sandbox: sb}
			dir := b.TempDir()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, code, err := s.runCommand(context.Background(), dir, "true", nil, 10*time.Second, 1024)
				require.NoError(b, err)
				require.Equal(b, 0, code)
			}
		})
	}
}
