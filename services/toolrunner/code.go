package toolrunner

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"unicode/utf8"
)

// heraldToolsSource is the herald_tools module an execute_code program
// imports. It travels in the program's environment and is loaded from
// there, so nothing has to be written where a sandbox could hide it.
//
//go:embed herald_tools.py
var heraldToolsSource string

// codeBootstrap loads herald_tools from the environment and runs the
// program the runner sends on fd 3. It holds no single quote, so the shell
// command can quote it whole.
const codeBootstrap = `import os,sys,types
src=os.environ.pop("HERALD_TOOLS_SOURCE")
m=types.ModuleType("herald_tools")
m.__file__="herald_tools.py"
sys.modules["herald_tools"]=m
exec(compile(src,"herald_tools.py","exec"),m.__dict__)
m._main()`

// programCommand is the shell command that starts a program with python.
func programCommand(python string) string {
	return "exec '" + python + "' -u -c '" + codeBootstrap + "'"
}

type codeArgs struct {
	Code string `json:"code"`
}

// executeCode runs the model's Python program the way terminal runs a
// command (same process handling, environment and workspace), with pipes to
// this runner through which each herald_tools function becomes a tool call.
func (s *Service) executeCode(ctx context.Context, c *call) outcome {
	var a codeArgs
	if err := decodeArgs(c.spec.Name, c.spec.Parameters, c.req.GetArguments(), &a); err != nil {
		return failed(err)
	}
	if strings.TrimSpace(a.Code) == "" {
		return failed(argError(c.spec.Name, c.spec.Parameters, `field "code" must not be empty`))
	}
	lim := s.cfg.Code
	if _, err := exec.LookPath(lim.Python); err != nil {
		return failed(fmt.Errorf("execute_code needs python3 (%s) on the tool runner, and there is none", lim.Python))
	}
	if denied, ok := s.approveProgram(ctx, c, a.Code); !ok {
		return denied
	}
	br, err := s.openBridge(ctx, c, a.Code)
	if err != nil {
		return failed(err)
	}
	env := append(s.secrets.scrubbedEnv(), "HERALD_TOOLS_SOURCE="+heraldToolsSource, "PYTHONIOENCODING=utf-8", "PYTHONDONTWRITEBYTECODE=1")
	out, code, err := s.runCommand(ctx, c.ws, programCommand(lim.Python), env, lim.Timeout, lim.MaxOutputChars*4, br.attach)
	br.close()
	return codeOutcome(out, code, err, lim)
}

// codeOutcome is the result the model reads: what the program printed, and
// why it stopped when it did not finish cleanly.
func codeOutcome(out string, exit int, err error, lim CodeLimits) outcome {
	o := outcome{status: statusOK}
	// Whatever bytes the program wrote, the result is text (a result that
	// is not UTF-8 could not even be stored).
	out = strings.ToValidUTF8(out, "\uFFFD")
	var note string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		o.status = statusTimeout
		note = fmt.Sprintf("[execute_code stopped the program after %s (code_execution.timeout); above is what it printed until then]", lim.Timeout)
	case err != nil:
		o.status = statusError
		note = "[" + err.Error() + "]"
	case exit == 127 && (strings.Contains(out, ": not found") || strings.Contains(out, "No such file or directory")):
		// The runner has python3 but the place commands run (a sandbox) does not.
		o.status = statusError
		note = "[execute_code needs python3 where commands run, and there is none there]"
	case exit != 0:
		// A bug in the program is the model's to fix, not the tool failing.
		o.status, o.correctable = statusError, true
		note = fmt.Sprintf("[the program exited with status %d]", exit)
	}
	switch {
	case note != "" && out != "":
		out = strings.TrimRight(out, "\n") + "\n" + note
	case note != "":
		out = note
	case out == "":
		out = "(the program printed nothing)"
	}
	o.content = truncateWithin(out, lim.MaxOutputChars)
	return o
}

// truncateWithin is truncateHeadTail with the marker counted in max, so
// the result is never longer than max characters.
func truncateWithin(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	marker := func(head, tail int) string {
		return fmt.Sprintf("\n\n[... %d characters truncated: the output had %d; showing the first %d and the last %d ...]\n\n", n-head-tail, n, head, tail)
	}
	// The longest marker this s can get bounds the room for text.
	room := max - utf8.RuneCountInString(marker(n, n))
	if room <= 0 {
		return string([]rune(s)[:max])
	}
	head := room * 2 / 5
	tail := room - head
	r := []rune(s)
	return string(r[:head]) + marker(head, tail) + string(r[n-tail:])
}
