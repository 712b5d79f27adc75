package toolrunner

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A runner killed with -9 in the middle of an execute_code program: the
// program's message is redelivered and the program runs again on another
// runner, where the calls the first run completed are answered from their
// stored results, the call it was in the middle of is reported as outcome
// unknown, and the rest run once.
func TestRunnerKilledMidProgramRunsNoToolCallTwice(t *testing.T) {
	const ackWait = time.Second
	h := newIdleHarness(t, listeningBus(t), func(c *Config) { c.AckWait = ackWait })
	victim := runnerProcess(t, h.bus, h.cfg.WorkspaceRoot, "runner-doomed", 1, ackWait)
	ws := func(name string) string { return filepath.Join(h.cfg.WorkspaceRoot, name) }

	req := h.request("execute_code", map[string]any{"code": `
import os
from herald_tools import terminal, write_file, ToolError
with open("runs.txt", "a") as f:   # the program's own effect, outside herald_tools
    f.write("run\n")
write_file(path="one.txt", content="written by call 1")
terminal(command="echo call2 >> calls.log")
try:
    terminal(command="echo call3 >> calls.log; touch call3.started; sleep 60")
except ToolError as e:
    print("call 3:", e)
terminal(command="echo call4 >> calls.log")
print("finished")
`})
	h.publish(req, req.GetCallId())
	require.Eventually(t, func() bool { _, err := os.Stat(ws("call3.started")); return err == nil },
		15*time.Second, 10*time.Millisecond, "the program never reached its third call")

	require.NoError(t, victim.Process.Signal(syscall.SIGKILL))
	_ = victim.Wait()
	h.startRunner("runner-survivor", h.cfg)

	res := h.result(req, 30*time.Second)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Equal(t, "runner-survivor", res.GetRunner())
	require.Contains(t, res.GetContent(), "call 3: outcome unknown")
	require.Contains(t, res.GetContent(), "finished")

	// Each terminal call ran at most once: call 2 was answered from its
	// stored result, call 3 was not started again, call 4 ran once.
	require.Equal(t, "call2\ncall3\ncall4\n", string(must(os.ReadFile(ws("calls.log")))))
	require.Equal(t, "run\nrun\n", string(must(os.ReadFile(ws("runs.txt")))), "the program itself ran twice")
	for n, runner := range map[string]string{"1": "runner-doomed", "2": "runner-doomed", "3": "runner-survivor", "4": "runner-survivor"} {
		r := innerResult(t, h, req, n)
		require.NotNil(t, r, "inner call %s has no result: lost", n)
		require.Equal(t, runner, r.GetRunner(), "inner call %s", n)
	}
	require.Equal(t, "unknown_outcome", innerResult(t, h, req, "3").GetStatus())
	h.drained()
}
