package toolrunner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// BenchmarkFileTools is what one file tool call costs in the runner's own
// code, from opening the call's workspace to its outcome (the bus round
// trip, the same for every tool, left out): read_file of a 100-line file
// and write_file / patch of a 1 KiB file, two folders deep, in a tenant's
// workspace. Beside the wall time per call it reports the CPU time.
//
//	go test -run '^$' -bench FileTools -count 5 ./services/toolrunner
func BenchmarkFileTools(b *testing.B) {
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = b.TempDir()
	cfg.CheckpointDir = b.TempDir()
	s := &Service{cfg: cfg}
	s.cfg.fill()
	s.tools = s.builtinTools()
	ws := filepath.Join(cfg.WorkspaceRoot, "tenants", "acme", "proj")
	require.NoError(b, os.MkdirAll(filepath.Join(ws, "src", "pkg"), 0o755))
	var text strings.Builder
	for range 100 {
		text.WriteString("func example() { return strings.Repeat(\"x\", 10) }\n")
	}
	require.NoError(b, os.WriteFile(filepath.Join(ws, "src", "pkg", "read.go"), []byte(text.String()), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(ws, "src", "pkg", "patch.go"), []byte("state = A\n"+strings.Repeat("y", 1014)+"\n"), 0o644))
	content := strings.Repeat("z", 1023) + "\n"
	cases := []struct {
		name, tool string
		args       func(i int) any
	}{
		{"read_file", "read_file", func(int) any { return map[string]any{"path": "src/pkg/read.go"} }},
		{"write_file", "write_file", func(int) any { return map[string]any{"path": "src/pkg/write.go", "content": content} }},
		{"patch", "patch", func(i int) any {
			from, to := "state = A", "state = B"
			if i%2 == 1 {
				from, to = to, from
			}
			return map[string]any{"path": "src/pkg/patch.go", "old_string": from, "new_string": to}
		}},
	}
	for _, tc := range cases {
		n := 1 // calls so far: patch alternates its two calls across runs
		b.Run(tc.name, func(b *testing.B) {
			spec, found := toolspec.Lookup(tc.tool)
			require.True(b, found)
			reqs := make([]*heraldpb.ToolCallRequest, 2)
			for i := range reqs {
				args, err := json.Marshal(tc.args(i))
				require.NoError(b, err)
				reqs[i] = &heraldpb.ToolCallRequest{CallId: "c", SessionId: "bench", Tenant: "acme", Step: 1,
					Tool: tc.tool, Arguments: string(args), Workspace: "tenants/acme/proj"}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := 0; i < b.N; i++ {
				n++
				if o := runDirect(s, reqs[n%2], spec); o.isError() {
					b.Fatal(o.content)
				}
			}
			// CPU time moves less than wall time on a shared machine.
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runDirect runs req as the runner runs a prepared call, without the bus.
func runDirect(s *Service, req *heraldpb.ToolCallRequest, spec toolspec.Spec) outcome {
	c, o := s.newCall(req, spec, s.tools[spec.Name], 1)
	if c == nil {
		return o
	}
	defer c.ws.close()
	return c.run(context.Background(), c)
}
