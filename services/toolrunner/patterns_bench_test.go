package toolrunner

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// benchCommands: the everyday commands, the evasions and Hermes' tables,
// each classified once per iteration (ns/command is per command).
func benchCommands() []string {
	var all []string
	for _, list := range [][]string{everyday, evasions, parityHardlineBlock, parityHardlineAllow, parityDangerous, paritySafe} {
		all = append(all, list...)
	}
	return all
}

// BenchmarkClassifyCommand is what judging one terminal command costs,
// parsed (now) beside word-split (before), over the same commands.
//
//	go test -run '^$' -bench ClassifyCommand -benchtime 200x ./services/toolrunner
func BenchmarkClassifyCommand(b *testing.B) {
	commands := benchCommands()
	for _, c := range []struct {
		name     string
		classify func(string) classification
	}{{"parsed", classifyCommand}, {"words-before", classifyWords}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for i := 0; i < b.N; i++ {
				for _, cmd := range commands {
					c.classify(cmd)
				}
			}
			n := float64(b.N * len(commands))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/command")
			// CPU time holds on a busy machine where wall time does not.
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/n, "cpu-ns/command")
		})
	}
}

// processCPU is this process's user + system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProgramCheck is what the execute_code check adds to a program:
// the check (python3 parsing the program in the sandbox) beside starting
// python3 in the sandbox with nothing to do, the floor of any program run.
//
//	go test -run '^$' -bench ProgramCheck -benchtime 30x ./services/toolrunner
func BenchmarkProgramCheck(b *testing.B) {
	sb, err := NewSandbox(config.DefaultSandbox(), zerolog.Nop())
	require.NoError(b, err)
	b.Cleanup(sb.close)
	s := &Service{sandbox: sb, cfg: DefaultConfig()}
	ws := heldWorkspace(b, b.TempDir())
	program := everydayPrograms[1]
	b.Run("check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			require.Equal(b, safeCommand, s.classifyProgram(context.Background(), ws, program).verdict)
		}
	})
	b.Run("python-start", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_, code, err := s.runCommand(context.Background(), ws, "exec python3 -I -c pass", nil, 10*time.Second, 1024)
			require.NoError(b, err)
			require.Equal(b, 0, code)
		}
	})
}
