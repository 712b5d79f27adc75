package toolrunner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// codeTools are the tools an execute_code program may call.
var codeTools = map[string]bool{"terminal": true, "read_file": true, "write_file": true, "patch": true, "search_files": true}

// maxCodeRequest bounds one request line from a program (a write_file of a
// large file fits; a runaway program cannot fill the runner's memory).
const maxCodeRequest = 16 << 20

// bridge serves one execute_code program's tool calls. The program reads
// answers from one inherited pipe and writes requests to another (fd 3 and
// 4 unless the command passes on others first), one JSON line each; every
// request becomes a real tool call of the session, with the deterministic
// id <program call id>-code<n>, so a program run again after its runner
// died is answered from the results its calls already have.
type bridge struct {
	s      *Service
	parent *call
	code   string
	ctx    context.Context
	cancel context.CancelFunc
	// toProgram/fromProgram are the runner's ends; progIn/progOut the program's.
	toProgram, progIn, fromProgram, progOut *os.File
	calls                                   int
	done                                    chan struct{}
}

func (s *Service) openBridge(ctx context.Context, c *call, code string) (*bridge, error) {
	progIn, toProgram, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("execute_code: %w", err)
	}
	fromProgram, progOut, err := os.Pipe()
	if err != nil {
		_, _ = progIn.Close(), toProgram.Close()
		return nil, fmt.Errorf("execute_code: %w", err)
	}
	b := &bridge{s: s, parent: c, code: code, toProgram: toProgram, progIn: progIn,
		fromProgram: fromProgram, progOut: progOut, done: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(ctx)
	go b.serve()
	return b, nil
}

// attach hands the program its ends of the pipes, after any descriptors
// the command already passes on (a sandbox's, say), and tells it which
// they are.
func (b *bridge) attach(cmd *exec.Cmd) {
	in := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, b.progIn, b.progOut)
	cmd.Env = append(cmd.Env, fmt.Sprintf("HERALD_TOOLS_FDS=%d,%d", in, in+1))
}

// close ends the bridge once the program has exited: a call still running
// (the program was stopped mid-call) is cancelled, and close waits until it
// has recorded its outcome. Closing the pipes unblocks the serve loop; it
// does not wait for EOF, which a process the program left behind could hold off.
func (b *bridge) close() {
	b.cancel()
	for _, f := range []*os.File{b.progIn, b.progOut, b.toProgram, b.fromProgram} {
		_ = f.Close()
	}
	<-b.done
}

func (b *bridge) serve() {
	defer close(b.done)
	if err := writeJSONLine(b.toProgram, map[string]string{"code": b.code}); err != nil {
		return
	}
	r := bufio.NewReaderSize(b.fromProgram, 64<<10)
	for {
		line, err := readLine(r, maxCodeRequest)
		if err != nil && !errors.Is(err, errLineTooLong) {
			return
		}
		reply := b.answer(line, err)
		if writeJSONLine(b.toProgram, reply) != nil {
			return
		}
	}
}

// codeReply is what a program's herald_tools function reads back.
type codeReply struct {
	OK     bool   `json:"ok"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

func refusal(format string, a ...any) codeReply {
	return codeReply{Error: fmt.Sprintf(format, a...)}
}

// answer makes the tool call a request line asks for.
func (b *bridge) answer(line []byte, readErr error) codeReply {
	if readErr != nil {
		return refusal("execute_code: a tool call's arguments may be at most %d bytes", maxCodeRequest)
	}
	var r struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return refusal("execute_code: unreadable request from herald_tools: %v", err)
	}
	if !codeTools[r.Tool] {
		return refusal("%q cannot be called from execute_code; the program may call terminal, read_file, write_file, patch and search_files", r.Tool)
	}
	limit := b.s.cfg.Code.MaxToolCalls
	if b.calls >= limit {
		return refusal("execute_code allows at most %d tool calls per program (code_execution.max_tool_calls); this %s call was not made", limit, r.Tool)
	}
	b.calls++
	req := b.innerRequest(r.Tool, string(r.Arguments))
	res, err := b.s.runCall(b.ctx, req, b.parent.delivered)
	switch {
	case err != nil:
		return refusal("the %s call could not be completed: %v", r.Tool, err)
	case res.GetCallDigest() != "" && res.GetCallDigest() != callDigest(req):
		return refusal("call %d of this program is not the call its earlier run made (%s), so its stored result does not apply; a program run again must make the same calls in the same order", b.calls, res.GetTool())
	case res.GetIsError():
		return codeReply{Error: res.GetContent()}
	}
	return codeReply{OK: true, Result: res.GetContent()}
}

// innerRequest is the n-th call of the program, attributed to its session
// as any call of the session is.
func (b *bridge) innerRequest(tool, args string) *heraldpb.ToolCallRequest {
	p := b.parent.req
	return &heraldpb.ToolCallRequest{CallId: p.GetCallId() + "-code" + strconv.Itoa(b.calls),
		SessionId: p.GetSessionId(), TaskId: p.GetTaskId(), Tenant: p.GetTenant(), Step: p.GetStep(),
		Tool: tool, Arguments: args, Workspace: p.GetWorkspace(), Pool: p.GetPool(),
		Approved: p.GetApproved(), ApprovalsMode: p.GetApprovalsMode()}
}

// callDigest identifies a call by its tool and arguments.
func callDigest(req *heraldpb.ToolCallRequest) string {
	sum := sha256.Sum256([]byte(req.GetTool() + "\x00" + req.GetArguments()))
	return hex.EncodeToString(sum[:8])
}

func writeJSONLine(f *os.File, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	return err
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most max bytes; a longer line is skipped
// to its end and reported as errLineTooLong.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) <= max {
			line = append(line, chunk...)
		} else {
			line = nil
			max = -1
		}
		switch {
		case err == nil && max < 0:
			return nil, errLineTooLong
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}
