package toolrunner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

type terminalArgs struct {
	Command string `json:"command"`
	Timeout *int   `json:"timeout"`
}

// terminalReply is the JSON the model reads.
type terminalReply struct {
	Output   string `json:"output"`
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`
}

func (s *Service) terminal(ctx context.Context, c *call) outcome {
	var a terminalArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	if a.Command == "" {
		return failed(argError(c.spec.Name, c.spec.Parameters, `field "command" must not be empty`))
	}
	if denied, ok := s.approve(ctx, c, a.Command); !ok {
		return denied
	}
	timeout := s.terminalTimeout(c, a.Timeout)
	out, code, err := s.runCommand(ctx, c.ws, a.Command, s.secrets.scrubbedEnv(), timeout, s.cfg.TerminalMaxChars*4)
	reply := terminalReply{Output: truncateHeadTail(out, s.cfg.TerminalMaxChars), ExitCode: code}
	status := statusOK
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		status = statusTimeout
		reply.Error = fmt.Sprintf("the command timed out after %s; it and every process it started were killed", timeout)
	case err != nil:
		status = statusError
		reply.Error = err.Error()
	}
	data, _ := json.Marshal(reply)
	return outcome{content: string(data), status: status}
}

func (s *Service) terminalTimeout(c *call, asked *int) time.Duration {
	t := s.cfg.TerminalTimeout
	if n := c.req.GetTimeoutSeconds(); n > 0 {
		t = time.Duration(n) * time.Second
	}
	if asked != nil && *asked > 0 {
		t = time.Duration(*asked) * time.Second
	}
	return min(t, s.cfg.MaxTerminalTimeout)
}

// runCommand runs command with bash in the sandbox (or, with sandbox mode
// none, in its own process group), so a timeout or the runner stopping ends
// everything the command started, not just the shell. It returns the
// combined output, the exit code (-1 when killed) and
// context.DeadlineExceeded on a timeout. Every command a tool runs goes
// through here; opts adjust the process before it starts (extra files are
// handed on into the sandbox).
func (s *Service) runCommand(parent context.Context, ws workspace, command string, env []string, timeout time.Duration, keep int, opts ...func(*exec.Cmd)) (string, int, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	script := command
	if !s.sandbox.Confined() {
		script = orphanGuard() + command
	}
	cmd, release, err := s.sandbox.Command(ctx, ws, script, env, opts...)
	if err != nil {
		return "", -1, fmt.Errorf("run command: %w", err)
	}
	defer release()
	// Pdeathsig: a runner killed with -9 takes its command with it (bwrap's
	// --die-with-parent then ends the whole sandbox; the call is redelivered
	// and reported as outcome unknown).
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Children that keep the output pipe open must not hold us past the kill.
	cmd.WaitDelay = 2 * time.Second
	buf := newHeadTailBuffer(keep)
	cmd.Stdout, cmd.Stderr = buf, buf
	err = cmd.Run()
	// The shell may exit while a background child lives on in the group.
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out := buf.String()
	if parent.Err() != nil {
		return out, -1, fmt.Errorf("command stopped: %w", parent.Err())
	}
	if ctx.Err() != nil {
		return out, -1, context.DeadlineExceeded
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out, exit.ExitCode(), nil
	}
	if err != nil {
		return out, -1, fmt.Errorf("run command: %w", err)
	}
	return out, 0, nil
}

// orphanGuard (sandbox mode none only; in the sandbox the PID namespace
// does this) prefixes a command with a watcher in its process group that
// kills the group once the runner is gone: Pdeathsig reaches only the shell,
// and a runner killed with -9 must not leave servers or builds running
// unowned. The watcher is disowned (a bare `wait` ignores it) and silent.
func orphanGuard() string {
	return fmt.Sprintf("{ while kill -0 %d 2>/dev/null; do sleep 1; done; kill -KILL 0; } </dev/null >/dev/null 2>&1 & disown; ", os.Getpid())
}
