package toolrunner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/proto"

	"github.com/stretchr/testify/require"
)

// programAttacks delete the folder victim from inside an execute_code
// program, directly and by roads that hide the call.
var programAttacks = map[string]string{
	"shutil.rmtree":        "import shutil\nshutil.rmtree('victim')",
	"aliased import":       "import shutil as s\ns.rmtree('victim')",
	"from import":          "from shutil import rmtree as gone\ngone('victim')",
	"os.remove walk":       "import os\nfor d, _, fs in os.walk('victim', topdown=False):\n    [os.remove(os.path.join(d, f)) for f in fs]\n    os.rmdir(d)",
	"pathlib":              "from pathlib import Path\nfor p in Path('victim').iterdir():\n    p.unlink()\nPath('victim').rmdir()",
	"subprocess":           "import subprocess\nsubprocess.run(['rm', '-rf', 'victim'])",
	"os.system":            "import os\nos.system('rm -rf victim')",
	"os.popen":             "import os\nos.popen('rm -rf victim').read()",
	"os.execvp in a child": "import os\nif os.fork() == 0:\n    os.execvp('rm', ['rm', '-rf', 'victim'])\nos.wait()",
	"pty.spawn":            "import pty\npty.spawn(['rm', '-rf', 'victim'])",
	"getattr computed":     "import os\ngetattr(os, 'sys' + 'tem')('rm -rf victim')",
	"getattr literal":      "import os\ngetattr(os, 'system')('rm -rf victim')",
	"__import__ computed":  "__import__('shu' + 'til').rmtree('victim')",
	"__import__ literal":   "__import__('shutil').rmtree('victim')",
	"importlib":            "import importlib\nimportlib.import_module('shutil').rmtree('victim')",
	"exec of text":         "import base64\nexec(base64.b64decode('aW1wb3J0IHNodXRpbDsgc2h1dGlsLnJtdHJlZSgndmljdGltJyk='))",
	"exec of a literal":    "exec(\"import shutil; shutil.rmtree('victim')\")",
	"eval":                 "eval(\"__import__('shutil').rmtree('victim')\")",
	"star import":          "from os import *\nsystem('rm -rf victim')",
	"module __dict__":      "import os\nos.__dict__['system']('rm -rf victim')",
	"vars of a module":     "import os\nvars(os)['system']('rm -rf victim')",
	"ctypes libc":          "import ctypes\nctypes.CDLL(None).system(b'rm -rf victim')",
	"function reference":   "import shutil\nf = shutil.rmtree\nf('victim')",
	"map over remove":      "import os\nlist(map(os.remove, ['victim/keep.txt']))\nos.rmdir('victim')",
	"sys.modules":          "import sys, shutil\nsys.modules['shutil'].rmtree('victim')",
	"builtins subclasses":  "import subprocess\n[c for c in ().__class__.__bases__[0].__subclasses__() if c.__name__ == 'Popen'][0](['rm', '-rf', 'victim']).wait()",
	"os found by gc":       "import gc\nm = [o for o in gc.get_objects() if getattr(o, '__name__', '') == 'posix'][0]\nm.system('rm -rf victim')",
	"os from a frame":      "import sys\nsys._getframe().f_globals['__builtins__']['__import__']('shutil').rmtree('victim')",
	"asyncio subprocess":   "import asyncio\nasync def m():\n    p = await asyncio.create_subprocess_exec('rm', '-rf', 'victim')\n    await p.wait()\nasyncio.run(m())",
}

// Everyday programs run without a prompt.
var everydayPrograms = []string{
	"print(sum(range(10)))",
	"import json, os\nprint(json.dumps(sorted(os.listdir('.'))))\nprint(os.path.exists('victim'))",
	"from herald_tools import read_file, write_file\nwrite_file(path='out.txt', content='hi')\nprint(read_file(path='out.txt'))",
	"import re, collections\nc = collections.Counter(re.findall(r'\\w+', 'a b a'))\nprint(c.most_common(1))",
	"with open('notes.txt', 'w') as f:\n    f.write('x')\nprint(open('notes.txt').read())",
	"class A:\n    def __repr__(self):\n        return type(self).__name__ + str(self.__dict__)\nprint(A())",
	"import os\nprint(os.getcwd(), os.path.join('a', 'b'))",
	"import platform\nprint(platform.system())",
	"xs = [1, 2, 3]\nxs.remove(2)\nprint(xs)",
	"def f(:\n  pass", // does not parse: python refuses it, nothing runs
}

func TestProgramCheckFlagsDangerousProgramsInTheSandbox(t *testing.T) {
	h := newHarness(t)
	for name, program := range programAttacks {
		got := h.svc.classifyProgram(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), program)
		require.Equal(t, needsApproval, got.verdict, "%s ran unasked", name)
		require.NotEmpty(t, got.reason)
	}
	for _, program := range everydayPrograms {
		got := h.svc.classifyProgram(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), program)
		require.Equal(t, safeCommand, got.verdict, "%q: %s", program, got.reason)
	}
}

// The reason names the call and its line, so a person asked knows what to look at.
func TestProgramCheckNamesTheCall(t *testing.T) {
	h := newHarness(t)
	got := h.svc.classifyProgram(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), "x = 1\nimport shutil\nshutil.rmtree('victim')")
	require.Contains(t, got.reason, "shutil.rmtree (line 3)")
}

// A program the check cannot judge (its parse exhausts the recursion
// limit), or a check that fails, fails closed.
func TestProgramTheCheckCannotReadNeedsApproval(t *testing.T) {
	h := newHarness(t)
	deep := "x = " + strings.Repeat("1+", 200000) + "1"
	got := h.svc.classifyProgram(context.Background(), heldWorkspace(t, h.cfg.WorkspaceRoot), deep)
	require.Equal(t, needsApproval, got.verdict, got.reason)
	require.Contains(t, got.reason, "could not be checked")

	broken := newHarness(t, func(c *Config) { c.Code.Python = "/usr/bin/false" })
	got = broken.svc.classifyProgram(context.Background(), heldWorkspace(t, broken.cfg.WorkspaceRoot), "print(1)")
	require.Equal(t, needsApproval, got.verdict, got.reason)
	require.Contains(t, got.reason, "could not be checked")
}

// Each attack through the real execute_code tool in the real sandbox: with
// approvals "deny" it does not run and the model reads why; with approvals
// "off" it deletes victim, so the refusal is what saved it.
func TestProgramEvasionsAreRefusedUnderDeny(t *testing.T) {
	h := newHarness(t)
	root := h.cfg.WorkspaceRoot
	for name, program := range programAttacks {
		t.Run(name, func(t *testing.T) {
			victim := plantVictim(t, root)
			req := h.request("execute_code", map[string]any{"code": program})
			req.ApprovalsMode = ApprovalsDeny
			res := h.run(req)
			require.Equal(t, "denied", res.GetStatus(), res.GetContent())
			require.Contains(t, res.GetContent(), "this program")
			require.Contains(t, res.GetContent(), "approvals are set to deny")
			require.FileExists(t, filepath.Join(victim, "keep.txt"))

			victim = plantVictim(t, root)
			req = h.request("execute_code", map[string]any{"code": program})
			req.ApprovalsMode = ApprovalsOff
			res = h.run(req)
			require.NoDirExists(t, victim, "with approvals off the attack should work: %s", res.GetContent())
		})
	}
}

// Under deny, an everyday program still runs.
func TestEverydayProgramsRunUnderDeny(t *testing.T) {
	h := newHarness(t)
	req := h.request("execute_code", map[string]any{"code": everydayPrograms[2]})
	req.ApprovalsMode = ApprovalsDeny
	res := h.run(req)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Contains(t, res.GetContent(), "hi")
	require.Equal(t, "hi", string(must(os.ReadFile(filepath.Join(h.cfg.WorkspaceRoot, "out.txt")))))
}

// A dangerous program asks the same question a terminal command does, and
// runs once a person approves it.
func TestDangerousProgramRunsWhenApproved(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ApprovalTimeout = 10 * time.Second })
	victim := plantVictim(t, h.cfg.WorkspaceRoot)
	evs := h.events()
	req := h.request("execute_code", map[string]any{"code": programAttacks["shutil.rmtree"]})
	h.publish(req, req.GetCallId())
	ev := waitEvent(t, evs, proto.EventApproval)
	require.Equal(t, programAttacks["shutil.rmtree"], ev.Args)
	require.Contains(t, ev.Message, "program that deletes files")
	require.DirExists(t, victim, "nothing runs before the answer")
	answer(t, h, proto.Input{RequestID: ev.RequestID, Approved: ptr(true)})
	res := h.result(req, 20*time.Second)
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.NoDirExists(t, victim)
}
