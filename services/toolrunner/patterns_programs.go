package toolrunner

import (
	"path"
	"regexp"
	"strings"
)

// run judges one simple command: words as the shell will pass them, in
// where its input comes from, more when further arguments are added at run
// time (xargs, find -exec).
func (v *walker) run(ws []shellWord, in input, more bool) {
	if len(ws) == 0 || !v.budget() {
		return
	}
	prog := ws[0]
	if !prog.literal || prog.glob || prog.brace || prog.raw == "" || strings.HasPrefix(prog.raw, "=") {
		v.flag(needsApproval, "runs a program whose name is decided only when it runs ("+prog.raw+")")
		return
	}
	if strings.ContainsAny(prog.raw, " \t\n;|&<>()$`") {
		// A name holding shell syntax is code to whoever runs it through a
		// shell (sudo -s, su, a wrapper the table does not know).
		v.flag(needsApproval, "runs a program whose name holds shell syntax ("+prog.raw+")")
		v.nest(strings.Join(raws(ws), " "))
		return
	}
	name, args := path.Base(prog.text), ws[1:]
	if name == "sudo" {
		v.consider(classifySudo(texts(ws)))
	}
	if spec, ok := wrappers[name]; ok {
		v.wrapper(name, spec, args, in, more)
		return
	}
	if v.special(name, args, in, more) {
		return
	}
	v.rules(name, args, more)
}

// rules applies the pattern rules to a command whose program is known.
func (v *walker) rules(name string, args []shellWord, more bool) {
	words := append([]string{name}, texts(args)...)
	v.consider(classifySegment(strings.Join(words, " ")))
	if name == "chmod" {
		v.consider(classifyChmod(raws(args)))
	}
	if copiers[name] {
		v.consider(classifyRenamedProgram(name, texts(args)))
	}
	for _, t := range writtenFiles(words) {
		v.consider(classifyTarget(t))
	}
	if !argumentsMatter(name) {
		return
	}
	if w, ok := opaque(args); ok {
		v.flag(needsApproval, "runs "+name+" with arguments decided only when it runs ("+w.raw+")")
	} else if more {
		v.flag(needsApproval, "runs "+name+" with arguments taken from its input")
	}
	if globFlags[name] {
		for _, a := range args {
			if a.text == "--" {
				break
			}
			if a.glob && strings.ContainsAny(a.raw[:1], "*?[") {
				v.flag(needsApproval, "passes "+name+" a pattern that can expand to an option (a file named -rf)")
			}
		}
	}
	v.consider(classifyOptions(name, raws(args)))
}

// argumentsMatter: commands whose verdict depends on their arguments (the
// rules above look at them), so an argument the classifier cannot read
// makes the verdict unknown.
func argumentsMatter(name string) bool {
	return sensitivePrograms[name] || strings.HasPrefix(name, "mkfs")
}

var sensitivePrograms = set("rm", "find", "dd", "chmod", "chown", "chgrp", "git", "pkill", "killall", "kill",
	"systemctl", "crontab", "mv", "cp", "install", "ln", "tee", "truncate", "sed", "mke2fs", "mkswap",
	"wipefs", "shutdown", "reboot", "halt", "poweroff", "init", "telinit", "tar", "zip", "rsync", "ssh",
	"psql", "mysql", "mariadb", "sqlite3", "clickhouse-client", "clickhouse", "mongo", "mongosh", "redis-cli",
	"shred", "make", "npx", "npm", "vim", "vi", "nvim", "ex", "gdb", "socat", "nc", "ncat", "netcat", "man")

var copiers = set("cp", "ln", "install", "mv", "link", "rsync")

// classifyRenamedProgram flags a program the approval check judges (rm,
// a shell, an interpreter) copied or linked under another name: the new
// name would run it unjudged (ln -s /bin/rm del; ./del -rf x).
func classifyRenamedProgram(name string, args []string) classification {
	files := nonFlags(args)
	if len(files) < 2 {
		return classification{}
	}
	for _, f := range files[:len(files)-1] {
		base := path.Base(f)
		if strings.Contains(f, "/") && isJudgedProgram(base) {
			return classification{needsApproval, "gives a program the approval check judges (" + base + ") another name (" + name + ")"}
		}
	}
	return classification{}
}

func isJudgedProgram(name string) bool {
	_, wrapped := wrappers[name]
	return argumentsMatter(name) || shells[name] || wrapped || interpreterCodeFlags(name) != "" ||
		name == "awk" || name == "gawk" || name == "busybox" || name == "eval"
}

// globFlags: commands a file named like an option (-rf, -R) turns dangerous.
var globFlags = set("rm", "chmod", "chown", "chgrp")

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// special handles the programs that run other code: shells, interpreters,
// eval, exec, source, alias. It reports whether it judged the command.
func (v *walker) special(name string, args []shellWord, in input, more bool) bool {
	switch {
	case shells[name]:
		v.shell(name, args, in, more)
	case interpreterCodeFlags(name) != "":
		v.interpreter(name, args, in, more)
	case name == "awk" || name == "gawk" || name == "mawk" || name == "nawk":
		v.awk(args, more)
	case name == "eval":
		v.flag(needsApproval, "runs eval (text turned into commands)")
		if _, ok := opaque(args); ok || more {
			return true
		}
		v.nest(strings.Join(raws(args), " "))
	case name == "source" || name == ".":
		v.flag(needsApproval, "runs a file as commands of this shell (source), which the classifier cannot read")
	case name == "alias" && len(args) > 0:
		v.flag(needsApproval, "defines an alias (a name that can stand for any command)")
	case name == "hash" && hasFlag(args, 'p'):
		v.flag(needsApproval, "maps a command name to another program (hash -p)")
	case name == "enable" && hasFlag(args, 'f'):
		v.flag(needsApproval, "loads a shell builtin from a library (enable -f)")
	case name == "trap":
		v.trap(args, more)
	case name == "find":
		v.findExec(args)
		return false // find's own rules (-delete, -exec rm) apply too
	case name == "parallel":
		v.flag(needsApproval, "runs commands built from its input (parallel)")
	case name == "watch":
		v.joined(args, "watch")
	case name == "at" || name == "batch":
		v.flag(needsApproval, "schedules commands to run later (at)")
	case name == "read" || name == "mapfile" || name == "readarray" || name == "unset" ||
		(name == "printf" && hasFlag(args, 'v')) || name == "let":
		v.runtimeValue, v.evalContext = true, true
		return false
	default:
		return false
	}
	return true
}

// findExec judges the commands find runs (-exec, -execdir, -ok, -okdir):
// {} is a file name known only when it runs.
func (v *walker) findExec(args []shellWord) {
	for i := 0; i < len(args); i++ {
		switch args[i].raw {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		var cmd []shellWord
		for i++; i < len(args) && args[i].raw != ";" && args[i].raw != "+"; i++ {
			w := args[i]
			if strings.Contains(w.raw, "{}") {
				w.literal = false
			}
			cmd = append(cmd, w)
		}
		v.run(cmd, input{}, false)
	}
}

func raws(ws []shellWord) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.raw
	}
	return out
}

// hasFlag reports a short option letter among leading dash groups.
func hasFlag(args []shellWord, letter byte) bool {
	for _, a := range args {
		if !strings.HasPrefix(a.raw, "-") || a.raw == "--" {
			return false
		}
		if !strings.HasPrefix(a.raw, "--") && strings.IndexByte(a.raw[1:], letter) >= 0 {
			return true
		}
	}
	return false
}

// joined judges words a program hands to `sh -c` joined by spaces (watch,
// su -c, script -c, flock -c).
func (v *walker) joined(args []shellWord, who string) {
	rest := args
	for len(rest) > 0 && strings.HasPrefix(rest[0].raw, "-") {
		if rest[0].raw == "-n" || rest[0].raw == "--interval" {
			rest = rest[1:]
		}
		if len(rest) > 0 {
			rest = rest[1:]
		}
	}
	if w, ok := opaque(rest); ok {
		v.flag(needsApproval, "runs shell code that is not literal through "+who+" ("+w.raw+")")
		return
	}
	v.nest(strings.Join(raws(rest), " "))
}

func (v *walker) trap(args []shellWord, more bool) {
	if len(args) < 2 || strings.HasPrefix(args[0].raw, "-") {
		return
	}
	if !args[0].literal || more {
		v.flag(needsApproval, "sets a trap whose code is not literal")
		return
	}
	v.nest(args[0].raw)
}

func (v *walker) awk(args []shellWord, more bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a.raw == "-f" || strings.HasPrefix(a.raw, "--file"):
			return // the program is a file
		case a.raw == "-v" || a.raw == "-F":
			i++
		case strings.HasPrefix(a.raw, "-") && a.raw != "-" && a.raw != "--":
		default:
			if !a.literal || more {
				v.flag(needsApproval, "runs an awk program that is not literal")
			} else if awkRunsCommands.MatchString(a.raw) {
				v.flag(needsApproval, "runs commands from an awk program (system(), a pipe to a command)")
			}
			return
		}
	}
}

var awkRunsCommands = regexp.MustCompile(`\bsystem\b|\|`)

// classifyOptions flags options with which a program runs a command the
// classifier cannot judge (tar --checkpoint-action=exec, rsync -e, git -c
// alias.x=!cmd, vim -c '!cmd').
func classifyOptions(name string, args []string) classification {
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		if why := commandOption(name, a, next); why != "" {
			return classification{needsApproval, "runs a command given in its options (" + name + " " + why + ")"}
		}
	}
	return classification{}
}

var gitCommandConfig = regexp.MustCompile(`^(alias\..*=\s*!|core\.(sshcommand|pager|editor|fsmonitor|hookspath|askpass|gitproxy)|diff\..*\.(textconv|command)|diff\.external|credential\.helper|filter\.|protocol\.ext|uploadpack\.packobjectshook|sequence\.editor|merge\..*\.driver|pager\.|gpg\.program|ssh\.variant)`)

func commandOption(name, raw, rawNext string) string {
	a, next := strings.ToLower(raw), strings.ToLower(rawNext)
	switch name {
	case "tar":
		for _, p := range []string{"--checkpoint-action", "--to-command", "--use-compress-program", "--rsh-command", "--info-script", "--new-volume-script"} {
			if strings.HasPrefix(a, p) {
				return p
			}
		}
		if raw == "-I" || strings.HasPrefix(raw, "-I") && !strings.HasPrefix(raw, "--") {
			return "-I"
		}
	case "zip":
		if a == "-tt" || strings.HasPrefix(a, "--unzip-command") {
			return a
		}
	case "rsync":
		if a == "-e" || strings.HasPrefix(a, "--rsh") || strings.HasPrefix(a, "--rsync-path") {
			return a
		}
	case "ssh":
		if strings.Contains(a, "proxycommand") || strings.Contains(a, "localcommand") || strings.Contains(next, "proxycommand") {
			return "-o proxycommand"
		}
	case "git":
		if (a == "-c" && gitCommandConfig.MatchString(next)) || ((a == "config") && gitCommandConfig.MatchString(next+"=")) {
			return a + " " + next
		}
		if strings.HasPrefix(a, "--upload-pack") || strings.HasPrefix(a, "--receive-pack") || strings.HasPrefix(a, "--exec") {
			return a
		}
	case "vim", "vi", "nvim", "ex", "gdb":
		if (a == "-c" || a == "--cmd" || a == "-ex" || strings.HasPrefix(a, "+")) && (strings.Contains(next+a, "!") || strings.Contains(next+a, "system") || strings.Contains(next+a, "shell") || strings.Contains(next+a, "py")) {
			return a
		}
	case "make":
		if strings.HasPrefix(a, "--eval") {
			return a
		}
	case "npx", "npm":
		if a == "-c" || strings.HasPrefix(a, "--call") {
			return a
		}
	case "socat":
		if strings.HasPrefix(a, "exec:") || strings.HasPrefix(a, "system:") {
			return a
		}
	case "nc", "ncat", "netcat":
		if a == "-e" || a == "-c" || strings.HasPrefix(a, "--exec") || strings.HasPrefix(a, "--sh-exec") {
			return a
		}
	case "man":
		if a == "-p" || a == "--pager" || strings.HasPrefix(a, "--pager=") {
			return a
		}
	case "crontab":
		if a != "-l" && !strings.HasPrefix(a, "-") {
			return "(installs scheduled commands)"
		}
	}
	return ""
}
