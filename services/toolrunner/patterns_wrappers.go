package toolrunner

import (
	"regexp"
	"strings"
)

// wrapperSpec says how a program that runs another one reads its own
// arguments before the command it runs.
type wrapperSpec struct {
	argFlags   string   // short options that take the next word (-u root)
	longArgs   []string // long options that take the next word (--user root)
	operands   int      // words before the command (timeout's duration, chroot's root)
	codeFlag   byte     // an option whose argument is shell code (su -c, flock -c)
	forcesAsk  string   // a reason the wrapper itself needs approval (exec)
	lookupOnly string   // options with which nothing runs (command -v)
}

var wrappers = map[string]wrapperSpec{
	"sudo":        {argFlags: "ugCDhprtTU", longArgs: []string{"--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--command-timeout", "--other-user"}},
	"doas":        {argFlags: "uC"},
	"pkexec":      {longArgs: []string{"--user"}},
	"nohup":       {},
	"setsid":      {},
	"time":        {argFlags: "fo", longArgs: []string{"--format", "--output"}},
	"nice":        {argFlags: "n", longArgs: []string{"--adjustment"}},
	"ionice":      {argFlags: "cnp", longArgs: []string{"--class", "--classdata", "--pid"}},
	"stdbuf":      {argFlags: "ioe", longArgs: []string{"--input", "--output", "--error"}},
	"timeout":     {argFlags: "sk", longArgs: []string{"--signal", "--kill-after"}, operands: 1},
	"chrt":        {argFlags: "TPD", operands: 1},
	"taskset":     {operands: 1},
	"chroot":      {longArgs: []string{"--userspec", "--groups"}, operands: 1},
	"flock":       {argFlags: "wEc", codeFlag: 'c', operands: 1},
	"unshare":     {argFlags: "S", longArgs: []string{"--setuid", "--setgid", "--wd", "--root"}},
	"nsenter":     {argFlags: "tSGrw", longArgs: []string{"--target", "--setuid", "--setgid", "--root", "--wd"}},
	"strace":      {argFlags: "oeEpsaPuIXbU"},
	"ltrace":      {argFlags: "oeEpsaPuIXbU"},
	"runuser":     {argFlags: "ugc", codeFlag: 'c'},
	"su":          {argFlags: "cgGs", codeFlag: 'c', longArgs: []string{"--command", "--group", "--shell"}},
	"script":      {argFlags: "cEIOTBm", codeFlag: 'c', longArgs: []string{"--command"}},
	"systemd-run": {argFlags: "pMuEH", longArgs: []string{"--property", "--unit", "--setenv", "--uid", "--gid", "--machine", "--working-directory"}},
	"exec":        {argFlags: "a", forcesAsk: "replaces the shell with another program (exec)"},
	"command":     {lookupOnly: "vV"},
	"builtin":     {},
	"busybox":     {},
	"toybox":      {},
	"env":         {argFlags: "uCS", longArgs: []string{"--unset", "--chdir", "--split-string"}},
	"xargs":       {argFlags: "IdaEeLnPs", longArgs: []string{"--delimiter", "--arg-file", "--max-args", "--max-procs", "--max-chars", "--max-lines", "--eof", "--process-slot-var"}},
	"fakeroot":    {},
	"eatmydata":   {},
	"unbuffer":    {},
	"torsocks":    {},
	"faketime":    {operands: 1},
	"catchsegv":   {},
	"sg":          {argFlags: "c", codeFlag: 'c', operands: 1},
}

// wrapper strips a wrapper's own options and judges the command it runs.
// An option it does not know may take the next word or not: both readings
// are judged, so an unknown option cannot hide the command.
func (v *walker) wrapper(name string, spec wrapperSpec, args []shellWord, in input, more bool) {
	if spec.forcesAsk != "" {
		v.flag(needsApproval, spec.forcesAsk)
	}
	v.unwrap(name, spec, args, in, more)
}

func (v *walker) unwrap(name string, spec wrapperSpec, args []shellWord, in input, more bool) {
	replace := ""
	for len(args) > 0 && v.budget() {
		a := args[0]
		if !a.literal {
			v.flag(needsApproval, "runs "+name+" with arguments decided only when it runs ("+a.raw+")")
			return
		}
		switch {
		case a.raw == "--":
			args = args[1:]
			goto command
		case name == "env" && strings.Contains(a.raw, "=") && !strings.HasPrefix(a.raw, "-"):
			n, val, _ := strings.Cut(a.raw, "=")
			v.consider(classifyVariable(n, shellWord{raw: val, text: strings.ToLower(val), literal: true}))
			args = args[1:]
			continue
		case !strings.HasPrefix(a.raw, "-") || a.raw == "-":
			goto command
		}
		// An option, or a group of short options.
		if spec.lookupOnly != "" && !strings.HasPrefix(a.raw, "--") && strings.ContainsAny(a.raw[1:], spec.lookupOnly) {
			return // command -v rm: a lookup, nothing runs
		}
		if name == "env" && (a.raw == "-S" || strings.HasPrefix(a.raw, "--split-string")) || (strings.HasPrefix(a.raw, "-S") && name == "env" && len(a.raw) > 2) {
			v.splitString(a, args)
			return
		}
		if name == "xargs" {
			if r, ok := xargsReplace(a, args); ok {
				replace = r
			}
		}
		if spec.codeFlag != 0 && takesCode(a.raw, spec.codeFlag) {
			v.codeArgument(name, a, args[1:])
			return
		}
		taken := optionTakesArgument(a.raw, spec)
		if taken == unknownArity {
			// Judge the reading where the next word is the option's value too.
			if len(args) > 1 {
				v.unwrap(name, spec, args[2:], in, more)
			}
			taken = 0
		}
		if int(taken)+1 > len(args) {
			return
		}
		args = args[1+int(taken):]
	}
	return
command:
	if len(args) < spec.operands {
		return
	}
	for _, op := range args[:spec.operands] {
		if !op.literal {
			v.flag(needsApproval, "runs "+name+" with arguments decided only when it runs ("+op.raw+")")
		}
	}
	args = args[spec.operands:]
	switch {
	case name == "xargs":
		v.xargs(args, replace, in)
	case name == "exec" && len(args) == 0:
	default:
		v.run(args, in, more)
	}
}

type arity int

const unknownArity arity = -1

// optionTakesArgument: 1 when the next word is the option's value, 0 when
// not, unknownArity for a long option the table does not know.
func optionTakesArgument(opt string, spec wrapperSpec) arity {
	if strings.HasPrefix(opt, "--") {
		if strings.Contains(opt, "=") {
			return 0
		}
		for _, l := range spec.longArgs {
			if opt == l {
				return 1
			}
		}
		return unknownArity
	}
	// -uroot carries its value; -u takes the next word.
	for i := 1; i < len(opt); i++ {
		if strings.IndexByte(spec.argFlags, opt[i]) >= 0 {
			if i == len(opt)-1 {
				return 1
			}
			return 0
		}
	}
	return 0
}

func takesCode(opt string, code byte) bool {
	if opt == "--command" {
		return true
	}
	return !strings.HasPrefix(opt, "--") && strings.IndexByte(opt[1:], code) >= 0
}

// codeArgument judges `su -c CODE`, `flock -c CODE`: the code is a shell line.
func (v *walker) codeArgument(name string, opt shellWord, rest []shellWord) {
	code := ""
	if i := strings.IndexByte(opt.raw, 'c'); i >= 0 && i < len(opt.raw)-1 && !strings.HasPrefix(opt.raw, "--") {
		code = opt.raw[i+1:]
	} else if len(rest) > 0 {
		if !rest[0].literal {
			v.flag(needsApproval, "runs shell code that is not literal through "+name+" ("+rest[0].raw+")")
			return
		}
		code = rest[0].raw
	}
	v.nest(code)
}

// splitString judges env -S 'rm -rf x': env splits the string into a command.
func (v *walker) splitString(opt shellWord, args []shellWord) {
	s := strings.TrimPrefix(strings.TrimPrefix(opt.raw, "--split-string"), "-S")
	s = strings.TrimPrefix(s, "=")
	rest := args[1:]
	if s == "" && len(rest) > 0 {
		s, rest = rest[0].raw, rest[1:]
		if !args[1].literal {
			v.flag(needsApproval, "runs env -S with a string decided only when it runs")
			return
		}
	}
	if w, ok := opaque(rest); ok {
		v.flag(needsApproval, "runs env with arguments decided only when it runs ("+w.raw+")")
		return
	}
	v.nest(s + " " + strings.Join(quoteAll(raws(rest)), " "))
}

func quoteAll(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return out
}

func xargsReplace(a shellWord, args []shellWord) (string, bool) {
	switch {
	case a.raw == "-I" && len(args) > 1:
		return args[1].raw, true
	case strings.HasPrefix(a.raw, "-I"):
		return a.raw[2:], true
	case a.raw == "-i" || a.raw == "--replace":
		return "{}", true
	case strings.HasPrefix(a.raw, "-i"):
		return a.raw[2:], true
	case strings.HasPrefix(a.raw, "--replace="):
		return strings.TrimPrefix(a.raw, "--replace="), true
	}
	return "", false
}

// xargs judges the command xargs builds: its arguments come from the input,
// and with -I the replacement string may stand anywhere, the program too.
func (v *walker) xargs(args []shellWord, replace string, in input) {
	if len(args) == 0 {
		return // xargs alone echoes
	}
	if replace != "" {
		marked := make([]shellWord, len(args))
		for i, a := range args {
			marked[i] = a
			if strings.Contains(a.raw, replace) {
				marked[i].literal = false
			}
		}
		args = marked
	}
	v.run(args, input{}, true)
}

// classifyVariable flags assignments that change which program a name runs
// or what a shell runs before a command.
func classifyVariable(name string, value shellWord) classification {
	upper := strings.ToUpper(name)
	switch {
	case riskyVariables[upper] || strings.HasPrefix(upper, "BASH_FUNC_"):
		return classification{needsApproval, "sets " + name + ", which changes what the shell or a program runs"}
	case upper == "PATH" && !safePath(value):
		return classification{needsApproval, "puts a relative, temporary or computed folder on PATH (" + value.raw + ")"}
	}
	return classification{}
}

var riskyVariables = set("IFS", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PS4",
	"PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "PYTHONSTARTUP", "PYTHONINSPECT", "PERL5OPT",
	"PERL5DB", "NODE_OPTIONS", "RUBYOPT", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXTERNAL_DIFF", "GIT_PAGER",
	"GIT_EDITOR", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "PAGER", "EDITOR", "VISUAL", "MANPAGER",
	"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "CDPATH", "EXECIGNORE",
	"HISTFILE", "INPUTRC", "TMOUT", "BASH_XTRACEFD", "LESSOPEN", "LESSCLOSE")

var safePathPart = regexp.MustCompile(`^(\$path|\$\{path\}|/(usr|bin|sbin|opt|snap|nix)(/[a-z0-9._+-]+)*/?|/usr/local/go/bin)$`)

// safePath: PATH made of $PATH and system folders (no ., no relative, no
// /tmp folder that a command could fill with a program named ls).
func safePath(value shellWord) bool {
	for _, part := range strings.Split(value.text, ":") {
		if !safePathPart.MatchString(part) {
			return false
		}
	}
	return true
}
