package toolrunner

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// BenchmarkRunnersScaleOut runs 64 calls of a 250 ms tool (terminal
// `sleep 0.25`) on 1, 2 and 4 runner processes with concurrency 1 each,
// and reports the wall time of each and the speed-up against one runner.
//
//	go test -run '^$' -bench RunnersScaleOut -benchtime 1x ./services/toolrunner
func BenchmarkRunnersScaleOut(b *testing.B) {
	const calls = 64
	for i := 0; i < b.N; i++ {
		var base time.Duration
		for _, n := range []int{1, 2, 4} {
			wall := scaleOut(b, n, calls)
			if n == 1 {
				base = wall
			}
			speedup := base.Seconds() / wall.Seconds()
			b.ReportMetric(wall.Seconds(), fmt.Sprintf("s-wall/%d-runners", n))
			b.ReportMetric(speedup, fmt.Sprintf("speedup/%d-runners", n))
			b.Logf("%d runner(s), concurrency 1, %d calls of 250 ms: wall %s, speed-up %.2fx", n, calls, wall.Round(time.Millisecond), speedup)
		}
	}
}

// scaleOut starts n runner processes on a fresh bus, publishes the calls and
// returns the time until every result is stored.
func scaleOut(b *testing.B, n, calls int) time.Duration {
	b.Helper()
	bb := listeningBus(b)
	workspace := b.TempDir()
	runners := make([]func(), 0, n)
	for i := 0; i < n; i++ {
		cmd := runnerProcess(b, bb, workspace, fmt.Sprintf("bench-%d", i), 1, 30*time.Second)
		runners = append(runners, func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	}
	defer func() {
		for _, stop := range runners {
			stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	for i := 0; i < calls; i++ {
		sid := fmt.Sprintf("bench%d", i%8)
		req := benchCall(sid, fmt.Sprintf("c%d", i))
		require.NoError(b, bus.PublishProto(ctx, bb.JS, bus.ToolCall(bus.DefaultPool, sid), sid+":"+req.GetCallId(), req))
	}
	stream, err := bb.JS.Stream(ctx, bus.StreamToolResults)
	require.NoError(b, err)
	require.Eventually(b, func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == uint64(calls)
	}, 2*time.Minute, 5*time.Millisecond)
	return time.Since(start)
}

func benchCall(sid, callID string) *heraldpb.ToolCallRequest {
	return &heraldpb.ToolCallRequest{CallId: callID, SessionId: sid, Tool: "terminal",
		Arguments: `{"command":"sleep 0.25"}`, Pool: bus.DefaultPool, Tenant: "bench"}
}
