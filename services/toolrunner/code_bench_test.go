package toolrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// BenchmarkExecuteCodeCalls compares 50 read_file calls made by one
// execute_code program with the same 50 calls sent one after another
// through TOOL_CALLS, as the loop would send them over 50 steps (model
// time left out).
//
//	go test -run '^$' -bench ExecuteCodeCalls -benchtime 5x ./services/toolrunner
func BenchmarkExecuteCodeCalls(b *testing.B) {
	const calls = 50
	bb := heraldtest.StartBus(b)
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = b.TempDir()
	cfg.CheckpointDir = b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(cfg.WorkspaceRoot, "f.txt"), []byte("one line\n"), 0o644))
	nc, js := bb.Connect(b, "runner")
	svc, err := New(cfg, service.Deps{NC: nc, JS: js, Log: zerolog.Nop(), Config: config.Default()})
	require.NoError(b, err)
	require.NoError(b, svc.Start(context.Background()))
	b.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	seq := 0
	run := func(tool string, args any) *heraldpb.ToolResult {
		seq++
		data, _ := json.Marshal(args)
		req := &heraldpb.ToolCallRequest{CallId: fmt.Sprintf("c%d", seq), SessionId: "bench", Tenant: "acme", Step: 1,
			Tool: tool, Arguments: string(data), Pool: bus.DefaultPool}
		// The stored result is also delivered to core subscribers of its subject.
		sub, err := bb.NC.SubscribeSync(bus.ToolResult("bench", req.GetCallId()))
		require.NoError(b, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(b, bb.NC.Flush())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(b, bus.PublishProto(ctx, js, bus.ToolCall(bus.DefaultPool, "bench"), req.GetCallId(), req))
		m, err := sub.NextMsg(30 * time.Second)
		require.NoError(b, err)
		res := &heraldpb.ToolResult{}
		require.NoError(b, bus.Decode(m.Data, res))
		return res
	}
	program := fmt.Sprintf("from herald_tools import read_file\nfor _ in range(%d):\n    read_file(path='f.txt')\nprint('done')\n", calls)
	var inProgram, oneByOne time.Duration
	for b.Loop() {
		t0 := time.Now()
		res := run("execute_code", map[string]any{"code": program})
		inProgram += time.Since(t0)
		require.Equal(b, "ok", res.GetStatus(), res.GetContent())
		t0 = time.Now()
		for range calls {
			require.Equal(b, "ok", run("read_file", map[string]any{"path": "f.txt"}).GetStatus())
		}
		oneByOne += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(inProgram.Seconds()*1000/n, "ms/program")
	b.ReportMetric(oneByOne.Seconds()*1000/n, "ms/50-bus-calls")
}
