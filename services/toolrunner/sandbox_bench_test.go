package toolrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
			ws := heldWorkspace(b, b.TempDir())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, code, err := s.runCommand(context.Background(), ws, "true", nil, 10*time.Second, 1024)
				require.NoError(b, err)
				require.Equal(b, 0, code)
			}
		})
	}
}

// BenchmarkSandboxHandOver is what a root runner spends, before each
// command, to give the sandbox user what root wrote in a workspace of n
// files (all already handed over: the steady state, a walk of lstats).
//
//	go test -run '^$' -bench SandboxHandOver ./services/toolrunner
func BenchmarkSandboxHandOver(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			sb := &Sandbox{cfg: config.DefaultSandbox(), stage: "set", hand: &handOverState{}}
			dir := b.TempDir()
			for i := range n {
				sub := filepath.Join(dir, fmt.Sprintf("d%d", i%50))
				require.NoError(b, os.MkdirAll(sub, 0o755))
				require.NoError(b, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d", i)), nil, 0o644))
			}
			// A settled workspace: its folders changed long enough ago.
			defer func(now func() time.Time) { handOverNow = now }(handOverNow)
			handOverNow = func() time.Time { return time.Now().Add(time.Minute) }
			sb.handOver(dir)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sb.handOver(dir)
			}
		})
	}
}
