package toolrunner

import (
	"regexp"
	"strings"
)

var shells = set("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "rbash", "fish", "csh", "tcsh", "lksh", "oksh")

// shell judges a shell started by the command: with -c its code is a
// command line judged in turn when it is literal; reading code from a pipe
// or from text the classifier cannot read counts as dangerous; a script
// named literally runs like any program the agent wrote (not inspected).
func (v *walker) shell(name string, args []shellWord, in input, more bool) {
	command, fromInput := false, false
	i := 0
options:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case !a.literal && command:
			break options // the code
		case !a.literal:
			v.flag(needsApproval, "starts "+name+" with options decided only when it runs ("+a.raw+")")
			return
		case a.raw == "":
			break options
		case a.raw == "--" || a.raw == "-":
			i++
			break options
		case a.raw == "-o" || a.raw == "+o" || a.raw == "-O" || a.raw == "+O" || a.raw == "--rcfile" || a.raw == "--init-file":
			i++
		case strings.HasPrefix(a.raw, "--"):
		case (a.raw[0] == '-' || a.raw[0] == '+') && len(a.raw) > 1:
			command = command || (a.raw[0] == '-' && strings.ContainsRune(a.raw[1:], 'c'))
			fromInput = fromInput || strings.ContainsRune(a.raw[1:], 's')
		default:
			break options
		}
	}
	rest := args[min(i, len(args)):]
	switch {
	case command:
		if len(rest) == 0 {
			return
		}
		if !rest[0].literal || more && len(rest) == 1 {
			v.flag(needsApproval, "runs shell code that is not literal ("+name+" -c "+rest[0].raw+")")
			return
		}
		v.nest(rest[0].raw)
	case fromInput || len(rest) == 0 || isStdin(rest[0].raw):
		v.codeFromInput(name, in, true)
	case !rest[0].literal || more:
		v.flag(needsApproval, "runs a shell script whose name is decided only when it runs ("+rest[0].raw+")")
	}
}

func isStdin(s string) bool {
	return s == "-" || s == "/dev/stdin" || s == "/proc/self/fd/0" || s == "/dev/fd/0"
}

// codeFromInput judges a shell or interpreter that reads its program from
// standard input. A literal here-document into a shell is judged as a
// command line; anything else it would run is unseen.
func (v *walker) codeFromInput(name string, in input, shell bool) {
	switch in.kind {
	case inputNone, inputFile:
	case inputText:
		if shell && in.literal {
			v.nest(in.text)
			return
		}
		v.flag(needsApproval, "feeds a program to "+name+" on its input (a here-document), which runs code the classifier does not read")
	case inputPipe:
		v.flag(needsApproval, "pipes code into "+name+" (… | "+name+"), which runs whatever the pipe carries")
	case inputOpaque:
		v.flag(needsApproval, "feeds "+name+" a program from a file named only when it runs")
	}
}

var interpreterName = regexp.MustCompile(`^(python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node|nodejs|bun|deno|php[0-9.]*|lua[0-9.]*|luajit|rscript|julia|osascript|groovy|jshell|irb|tclsh[0-9.]*|wish|pwsh|powershell|guile|racket|sbcl|ipython[0-9]*)$`)

// interpreterCodeFlags: the short options with which each interpreter runs
// code given on the command line ("" when name is no interpreter).
func interpreterCodeFlags(name string) string {
	if !interpreterName.MatchString(name) {
		return ""
	}
	switch {
	case strings.HasPrefix(name, "python") || strings.HasPrefix(name, "pypy") || strings.HasPrefix(name, "ipython") ||
		name == "pwsh" || name == "powershell":
		return "c"
	case strings.HasPrefix(name, "perl") || name == "julia":
		return "eE"
	case name == "node" || name == "nodejs" || name == "bun":
		return "ep"
	case strings.HasPrefix(name, "php"):
		return "rBRE"
	}
	return "e"
}

// interpreterArgFlags: options whose value is the next word (so not the
// script), per interpreter family.
var interpreterArgFlags = map[string]string{"python": "WXQ", "perl": "IMmxCd", "ruby": "IrCEFx", "node": "r", "php": "cdzf"}

func interpreterFamily(name string) string {
	for _, f := range []string{"python", "perl", "ruby", "node", "php"} {
		if strings.HasPrefix(name, f) {
			return f
		}
	}
	return ""
}

// interpreter judges python, perl, node and the like: code on the command
// line (-c, -e) or through a pipe or here-document is code the classifier
// does not read, so it counts as dangerous; a script file runs unasked.
func (v *walker) interpreter(name string, args []shellWord, in input, more bool) {
	codeFlags, argFlags := interpreterCodeFlags(name), interpreterArgFlags[interpreterFamily(name)]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !a.literal:
			v.flag(needsApproval, "starts "+name+" with arguments decided only when it runs ("+a.raw+")")
			return
		case isInlineCodeOption(name, a.raw, codeFlags):
			v.flag(needsApproval, "runs inline "+name+" code ("+a.raw+" …), which the classifier does not read")
			return
		case a.raw == "--" || isStdin(a.raw):
			if i+1 < len(args) && !isStdin(a.raw) {
				return
			}
			v.codeFromInput(name, in, false)
			return
		case strings.HasPrefix(a.raw, "-m") && interpreterFamily(name) == "python":
			return // python -m module: a module file runs
		case strings.HasPrefix(a.raw, "--"):
		case strings.HasPrefix(a.raw, "-") && len(a.raw) > 1:
			if strings.ContainsAny(a.raw[len(a.raw)-1:], argFlags) && argFlags != "" {
				i++
			}
		default:
			if more {
				v.flag(needsApproval, "runs "+name+" with a script taken from its input")
			}
			return // a script file
		}
	}
	v.codeFromInput(name, in, false)
}

func isInlineCodeOption(name, opt, codeFlags string) bool {
	lower := strings.ToLower(opt)
	switch lower {
	case "--eval", "--print", "-command", "--command", "-encodedcommand":
		return true
	}
	if strings.HasPrefix(lower, "--eval=") || strings.HasPrefix(lower, "--print=") || name == "deno" && opt == "eval" {
		return true
	}
	if !strings.HasPrefix(opt, "-") || strings.HasPrefix(opt, "--") {
		return false
	}
	group := opt[1:]
	if group == "" {
		return false
	}
	switch interpreterFamily(name) {
	case "perl", "ruby": // -Mfeature, -Ilib carry a value in the group
		if strings.ContainsAny(group[:1], "IMmx") {
			return false
		}
	case "python": // -W and -X carry a value
		if strings.ContainsAny(group[:1], "WX") {
			return false
		}
	}
	return strings.ContainsAny(group, codeFlags)
}
