package toolrunner

import (
	"context"
	"encoding/json"
	"github.com/heraldrun/herald/proto/heraldpb"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestLongCallIsKeptAliveNotRedelivered(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AckWait = 600 * time.Millisecond })
	res := h.call("terminal", map[string]any{"command": "echo run >> runs.txt; sleep 2.5"})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	h.drained()
	require.Equal(t, "run\n", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "runs.txt")))))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := h.bus.JS.Consumer(ctx, bus.StreamToolCalls, "toolrunner-default")
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.NumRedelivered)
}

// A runner that took a terminal call and died is simulated by taking the
// message from the shared consumer, recording the start as a runner does,
// and never acknowledging it.
func TestNonIdempotentCallOfADeadRunnerIsReportedAsOutcomeUnknown(t *testing.T) {
	cfg := func(c *Config) { c.AckWait = 500 * time.Millisecond }
	h := newHarness(t, cfg)
	require.NoError(t, h.svc.Shutdown(context.Background()))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	terminal := h.request("terminal", map[string]any{"command": "echo run >> runs.txt"})
	read := h.request("read_file", map[string]any{"path": "runs.txt"})
	h.publish(terminal, "t1")
	h.publish(read, "r1")
	cons, err := h.bus.JS.Consumer(ctx, bus.StreamToolCalls, "toolrunner-default")
	require.NoError(t, err)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++
	}
	require.Equal(t, 2, n)
	_, err = h.svc.state.Put(ctx, startedKey(terminal.GetSessionId(), terminal.GetCallId()), []byte("dead-runner"))
	require.NoError(t, err)

	h.startRunner("runner-2", h.cfg)
	res := h.result(terminal, 10*time.Second)
	require.Equal(t, "unknown_outcome", res.GetStatus())
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "outcome unknown")
	require.Contains(t, res.GetContent(), "dead-runner")
	require.NoFileExists(t, filepath.Join(h.cfg.WorkspaceRoot, "runs.txt"))

	// The idempotent call it never started simply runs on the other runner.
	res = h.result(read, 10*time.Second)
	require.Equal(t, "runner-2", res.GetRunner())
	require.Contains(t, res.GetContent(), "does not exist")
}

func TestPerToolConcurrencyLimit(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Concurrency = 4
		c.ToolConcurrency = map[string]int{"terminal": 1}
	})
	// Each call fails if another holds the lock folder at the same time.
	cmd := "mkdir lock || exit 7; sleep 0.3; rmdir lock"
	reqs := make([]*heraldpb.ToolCallRequest, 3)
	for i := range reqs {
		reqs[i] = h.request("terminal", map[string]any{"command": cmd})
		h.publish(reqs[i], reqs[i].GetCallId())
	}
	for _, req := range reqs {
		r := terminalOf(t, h.result(req, 10*time.Second))
		require.Equal(t, 0, r.ExitCode, r.Output)
	}
}

func TestCheckpointsAndRollback(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Checkpoints = true })
	file := func(name string) string { return filepath.Join(h.cfg.WorkspaceRoot, name) }
	require.NoError(t, os.WriteFile(file("keep.txt"), []byte("original"), 0o644))

	step := func(n int32, tool string, args map[string]any) {
		req := h.request(tool, args)
		req.Step = n
		require.Equal(t, "ok", h.run(req).GetStatus())
	}
	step(1, "write_file", map[string]any{"path": "a.txt", "content": "v1"})
	step(2, "patch", map[string]any{"path": "a.txt", "old_string": "v1", "new_string": "v2"})
	step(2, "write_file", map[string]any{"path": "new/b.txt", "content": "b"})
	step(2, "write_file", map[string]any{"path": "keep.txt", "content": "clobbered"})

	cps, err := ListCheckpoints(h.cfg, h.sid)
	require.NoError(t, err)
	require.Len(t, cps, 2)
	require.Equal(t, []int{1, 2}, []int{cps[0].Step, cps[1].Step})

	cp, err := Rollback(h.cfg, h.sid, "", "")
	require.NoError(t, err)
	require.Equal(t, 2, cp.Step)
	require.Equal(t, "v1", string(must(os.ReadFile(file("a.txt")))))
	require.Equal(t, "original", string(must(os.ReadFile(file("keep.txt")))))
	require.NoFileExists(t, file("new/b.txt"))

	_, err = Rollback(h.cfg, h.sid, "", cps[0].ID)
	require.NoError(t, err)
	require.NoFileExists(t, file("a.txt"))

	_, err = Rollback(h.cfg, "nobody", "", "")
	require.ErrorIs(t, err, ErrNoCheckpoint)
}

func TestNoCheckpointsUnlessEnabled(t *testing.T) {
	h := newHarness(t)
	require.Equal(t, "ok", h.call("write_file", map[string]any{"path": "a.txt", "content": "x"}).GetStatus())
	cps, err := ListCheckpoints(h.cfg, h.sid)
	require.NoError(t, err)
	require.Empty(t, cps)
}

func TestToolSpecsAreServedOnTheBus(t *testing.T) {
	h := newHarness(t)
	msg, err := h.bus.NC.Request(bus.ToolSpecsSubject, nil, 5*time.Second)
	require.NoError(t, err)
	var specs []ToolSpecJSON
	require.NoError(t, json.Unmarshal(msg.Data, &specs))
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		require.NotEmpty(t, s.Description)
		require.Equal(t, "object", s.Parameters["type"])
	}
	require.Equal(t, "clarify execute_code patch read_file search_files terminal todo write_file", strings.Join(names, " "))
}

func TestPoolsSeparateWork(t *testing.T) {
	h := newHarness(t) // runner-1 serves the default pool
	gpuCfg := h.cfg
	gpuCfg.Pool = "gpu"
	h.startRunner("gpu-runner", gpuCfg)

	req := h.request("write_file", map[string]any{"path": "gpu.txt", "content": "x"})
	req.Pool = "gpu"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, bus.PublishProto(ctx, h.bus.JS, bus.ToolCall("gpu", h.sid), req.GetCallId(), req))
	require.Equal(t, "gpu-runner", h.result(req, 10*time.Second).GetRunner())
	require.Equal(t, "runner-1", h.call("read_file", map[string]any{"path": "gpu.txt"}).GetRunner())
}
