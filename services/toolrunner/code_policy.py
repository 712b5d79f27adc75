# Herald's approval check for execute_code programs (docs/APPROVALS.md).
# It reads the program from stdin, parses it with Python's own ast (nothing
# of it runs) and prints one JSON line: {"dangerous": [reasons]}. What it
# flags is what the terminal check flags: deleting files, changing their
# permissions, starting processes, and code or names it cannot read.
import ast, json, sys

DELETE = {"shutil.rmtree", "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "shutil.chown",
          "os.chmod", "os.lchmod", "os.fchmod", "os.chown", "os.lchown", "os.fchown", "os.truncate"}
SPAWN = {"os.system", "os.popen", "os.posix_spawn", "os.posix_spawnp",
         "os.kill", "os.killpg", "pty.spawn", "asyncio.create_subprocess_exec",
         "asyncio.create_subprocess_shell", "os.startfile", "platform.popen"}
SPAWN_PREFIX = ("os.exec", "os.spawn", "subprocess.")
DYNAMIC = {"exec", "eval", "compile", "__import__", "importlib.import_module", "importlib.__import__",
           "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "globals", "locals",
           "pickle.loads", "pickle.load", "marshal.loads", "types.FunctionType", "types.CodeType",
           "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._getframe", "inspect.currentframe",
           "inspect.stack",
           "sys.modules", "runpy.run_path", "runpy.run_module", "code.interact", "code.InteractiveInterpreter",
           "code.InteractiveConsole", "builtins.getattr", "operator.attrgetter", "operator.methodcaller"}
NATIVE = {"ctypes", "cffi", "_ctypes", "_posixsubprocess", "posix", "_thread"}
WATCHED_MODULES = {"os", "shutil", "subprocess", "pty", "pathlib", "posix", "builtins", "importlib",
                   "sys", "ctypes", "asyncio", "multiprocessing", "runpy", "code", "operator"}
# Methods with these names delete or change permissions whatever object
# they are called on (pathlib.Path.unlink, Path.rmdir, Path.chmod...).
METHODS = {"unlink", "rmdir", "chmod", "lchmod", "rmtree", "chown", "lchown", "removedirs", "system", "popen",
           "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve",
           "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp",
           "check_output", "check_call", "Popen", "getoutput", "getstatusoutput"}
DUNDERS = {"__builtins__", "__globals__", "__subclasses__", "__getattribute__", "__code__",
           "__loader__", "__import__", "__bases__", "__mro__", "f_globals", "f_locals", "f_builtins",
           "f_back", "gi_frame", "cr_frame", "tb_frame"}


class Check(ast.NodeVisitor):
    def __init__(self):
        self.names = {}  # local name -> the qualified name it stands for
        self.found = []

    def flag(self, node, why):
        self.found.append("%s (line %d)" % (why, getattr(node, "lineno", 0)))

    def qualname(self, node):
        if isinstance(node, ast.Name):
            return self.names.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return base + "." + node.attr if base else None
        if isinstance(node, ast.Call):
            fn = self.qualname(node.func)
            if fn in ("__import__", "importlib.import_module") and node.args and literal(node.args[0]):
                return node.args[0].value
            if fn in ("getattr", "builtins.getattr") and len(node.args) >= 2 and literal(node.args[1]):
                base = self.qualname(node.args[0])
                return base + "." + node.args[1].value if base else None
        return None

    def judge(self, node, name):
        if not name:
            return False
        root = name.split(".")[0]
        if name in DELETE:
            self.flag(node, "deletes files or changes their permissions: " + name)
        elif name in SPAWN or name.startswith(SPAWN_PREFIX) or name == "subprocess":
            self.flag(node, "starts or signals processes: " + name)
        elif name in DYNAMIC:
            self.flag(node, "runs code or reaches names the check cannot read: " + name)
        elif root in NATIVE:
            self.flag(node, "loads native code: " + name)
        else:
            return False
        return True

    def visit_Import(self, node):
        for a in node.names:
            self.names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            self.judge(node, a.name if a.name.split(".")[0] in NATIVE else None)

    def from_plain_module(self, node):
        # platform.system(), json.x: a method of a module the check does not
        # watch. Anything else (a variable, a call's result) may be os.
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.names:
            return False
        return self.names[node.id].split(".")[0] not in WATCHED_MODULES

    def visit_ImportFrom(self, node):
        mod = ("." * node.level) + (node.module or "")
        for a in node.names:
            if a.name == "*":
                if mod.split(".")[0] in WATCHED_MODULES:
                    self.flag(node, "imports every name of " + mod + " (names the check cannot follow)")
                continue
            full = mod + "." + a.name
            self.names[a.asname or a.name] = full
            self.judge(node, full)
        if mod.split(".")[0] in NATIVE:
            self.flag(node, "loads native code: " + mod)

    def visit_Attribute(self, node):
        if node.attr == "__dict__" and (self.qualname(node.value) or "").split(".")[0] in WATCHED_MODULES:
            self.flag(node, "reaches a module's names through __dict__")
        elif node.attr in DUNDERS:
            self.flag(node, "reaches objects through " + node.attr)
        elif self.judge(node, self.qualname(node)):
            pass
        elif node.attr in METHODS and not self.from_plain_module(node.value):
            self.flag(node, "deletes files, changes permissions or starts processes: ." + node.attr + "()")
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in DUNDERS:
            self.flag(node, "reaches objects through " + node.id)
        name = self.names.get(node.id)
        if name and name != node.id:
            self.judge(node, name)
        elif node.id in DYNAMIC and node.id not in ("exec", "eval", "compile"):
            self.judge(node, node.id)
        elif node.id in ("exec", "eval", "compile") and not isinstance(getattr(node, "parent", None), ast.Call):
            self.judge(node, node.id)

    def visit_Call(self, node):
        fn = self.qualname(node.func)
        if fn in ("exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"):
            if node.args and literal(node.args[0]):
                self.nested(node, node.args[0].value)
            else:
                self.flag(node, "runs code the check cannot read: " + fn + "()")
            for a in node.args[1:] + [k.value for k in node.keywords]:
                self.visit(a)
            return
        if fn in ("getattr", "builtins.getattr", "setattr", "delattr") and len(node.args) >= 2 and not literal(node.args[1]):
            base = self.qualname(node.args[0]) or ""
            self.flag(node, "reaches an attribute by a computed name: %s(%s, …)" % (fn, base or "…"))
        if fn == "vars" and (not node.args or (self.qualname(node.args[0]) or "").split(".")[0] in WATCHED_MODULES):
            self.flag(node, "reaches a module's names through vars()")
        if fn in ("__import__", "importlib.import_module") and not (node.args and literal(node.args[0])):
            self.flag(node, "imports a module by a computed name")
        self.judge(node, self.qualname(node))
        self.generic_visit(node)

    def nested(self, node, source):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        inner = Check()
        inner.names = dict(self.names)
        inner.run(tree)
        for why in inner.found:
            self.found.append(why + " inside exec/eval")

    def run(self, tree):
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                child.parent = parent
        self.visit(tree)


def literal(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def main():
    source = sys.stdin.buffer.read()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        # Python will refuse it the same way: nothing of it runs.
        print(json.dumps({"dangerous": [], "syntax_error": True}))
        return
    check = Check()
    check.run(tree)
    seen = []
    for why in check.found:
        if why not in seen:
            seen.append(why)
    print(json.dumps({"dangerous": seen}))


sys.setrecursionlimit(5000)
main()
