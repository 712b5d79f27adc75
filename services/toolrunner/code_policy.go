package toolrunner

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// codePolicySource is the approval check for execute_code programs: it
// parses a program with Python's own ast and lists what in it deletes
// files, changes permissions, starts processes or runs code it cannot read.
//
//go:embed code_policy.py
var codePolicySource string

// codePolicyTimeout bounds the check; a program it cannot judge in time
// counts as dangerous.
const codePolicyTimeout = 20 * time.Second

// approveProgram applies the approvals mode to an execute_code program as
// approve does to a terminal command. With approvals off, or a task that
// pre-approved its calls, the program is not checked (nothing would ask).
func (s *Service) approveProgram(ctx context.Context, c *call, program string) (outcome, bool) {
	mode := s.approvalsMode(c)
	if mode == ApprovalsOff || (c.req.GetApproved() && mode != ApprovalsDeny) {
		return outcome{}, true
	}
	return s.decide(ctx, c, "program", program, s.classifyProgram(ctx, c.ws, program))
}

type programVerdict struct {
	Dangerous   []string `json:"dangerous"`
	SyntaxError bool     `json:"syntax_error"`
}

// classifyProgram runs the check with the program's python, in the same
// sandbox and workspace the program would run in; the program reaches it
// on stdin and none of it runs. A check that fails or says nothing
// readable fails closed.
func (s *Service) classifyProgram(ctx context.Context, ws workspace, program string) classification {
	env := append(s.secrets.scrubbedEnv(), "HERALD_CODE_POLICY="+codePolicySource, "PYTHONDONTWRITEBYTECODE=1")
	command := "exec '" + s.cfg.Code.Python + `' -I -W ignore -c 'import os; exec(os.environ["HERALD_CODE_POLICY"])'`
	out, code, err := s.runCommand(ctx, ws, command, env, codePolicyTimeout, 1<<16, func(cmd *exec.Cmd) {
		cmd.Stdin = strings.NewReader(program)
	})
	var v programVerdict
	switch {
	case err != nil:
		return classification{needsApproval, "could not be checked (" + err.Error() + ")"}
	case code == 127:
		return classification{} // no python where programs run: execute_code reports that itself
	case code != 0 || json.Unmarshal([]byte(lastLine(out)), &v) != nil:
		return classification{needsApproval, fmt.Sprintf("could not be checked (the check exited with status %d)", code)}
	case len(v.Dangerous) == 0:
		return classification{}
	}
	reasons := v.Dangerous
	if len(reasons) > 3 {
		reasons = append(reasons[:3:3], fmt.Sprintf("and %d more", len(v.Dangerous)-3))
	}
	return classification{needsApproval, strings.Join(reasons, "; ")}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}
