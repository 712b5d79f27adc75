"""Herald's tools as Python functions, for programs run by execute_code.

Each function is one real tool call made by the tool runner that runs the
program (approvals, workspace confinement, policy hooks and accounting as
for any call) and returns the tool's result text. A failed call raises
ToolError. The runner talks to the program over two inherited pipes named
in HERALD_TOOLS_FDS: it answers on the first and reads requests (one JSON
line each) from the second.
"""

import json
import linecache
import os
import sys
import threading
import traceback

__all__ = ["ToolError", "terminal", "read_file", "write_file", "patch", "search_files"]


class ToolError(Exception):
    """A tool call failed; the message is the tool's result."""


_lock = threading.Lock()
_fds = [int(fd) for fd in os.environ.pop("HERALD_TOOLS_FDS", "3,4").split(",")]
_replies = open(_fds[0], "r", encoding="utf-8", closefd=False)
_requests = open(_fds[1], "w", encoding="utf-8", closefd=False)


def _call(tool, **arguments):
    request = {"tool": tool, "arguments": {k: v for k, v in arguments.items() if v is not None}}
    with _lock:
        _requests.write(json.dumps(request) + "\n")
        _requests.flush()
        line = _replies.readline()
    if not line:
        raise ToolError("the tool runner stopped answering")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise ToolError(reply.get("error") or "the %s call failed" % tool)
    return reply["result"]


def terminal(command, timeout=None):
    """Run a shell command in the workspace; returns the JSON result text."""
    return _call("terminal", command=command, timeout=timeout)


def read_file(path, offset=None, limit=None):
    """Read a workspace file, with line numbers."""
    return _call("read_file", path=path, offset=offset, limit=limit)


def write_file(path, content):
    """Create or overwrite a workspace file."""
    return _call("write_file", path=path, content=content)


def patch(path, old_string, new_string, replace_all=None):
    """Replace exact text in a workspace file."""
    return _call("patch", path=path, old_string=old_string, new_string=new_string, replace_all=replace_all)


def search_files(pattern, path=None, file_glob=None):
    """Search file contents (or names, with pattern "*" and file_glob)."""
    return _call("search_files", pattern=pattern, path=path, file_glob=file_glob)


def _main():
    """Runs the program the runner sends first, as __main__."""
    code = json.loads(_replies.readline())["code"]
    # Tracebacks show the program's own lines.
    linecache.cache["<execute_code>"] = (len(code), None, code.splitlines(True), "<execute_code>")
    try:
        compiled = compile(code, "<execute_code>", "exec")
    except SyntaxError as e:
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
        sys.exit(1)
    try:
        exec(compiled, {"__name__": "__main__"})
    except SystemExit:
        raise
    except BaseException as e:
        # The program's own frames only: this bootstrap is not the model's concern.
        sys.stderr.write("".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next)))
        sys.exit(1)
