package toolrunner

import (
	"path"
	"regexp"
	"strings"
)

// ansiEscape matches terminal escape sequences (CSI, with ESC [ or the
// one-byte 0x9b, and OSC ... BEL) that would hide a command's words.
var ansiEscape = regexp.MustCompile("(\x1b\\[|\u009b)[0-9;?]*[a-zA-Z]|\x1b\\][^\x07]*\x07|\x1b[@-_]")

// visibleCommand is the command as the shell reads it: escape sequences and
// NUL bytes removed, full-width letters (ｒｍ) folded to ASCII.
func visibleCommand(command string) string {
	command = ansiEscape.ReplaceAllString(command, "")
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0:
			return -1
		case r >= '！' && r <= '～':
			return r - '！' + '!'
		case r == '\u3000':
			return ' '
		}
		return r
	}, command)
}

// classifySudo flags sudo told to read a password from stdin or an askpass
// helper (-S, --stdin, -A, --askpass, or a flag group holding s or a, as
// -nS): an agent piping a guessed password into sudo.
func classifySudo(words []string) classification {
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		words = words[1:]
	}
	if len(words) == 0 || path.Base(words[0]) != "sudo" {
		return classification{}
	}
	for _, w := range words[1:] {
		switch {
		case w == "--stdin" || w == "--askpass":
		case strings.HasPrefix(w, "--"):
			continue
		case strings.HasPrefix(w, "-") && strings.ContainsAny(w, "sa"):
		case strings.HasPrefix(w, "-"):
			continue
		default:
			return classification{}
		}
		return classification{needsApproval, "runs sudo with a password from stdin or an askpass helper"}
	}
	return classification{}
}

// sensitiveFile is a destination whose overwriting changes who can log in,
// what every new shell runs, or which secrets a program reads.
var sensitiveFile = regexp.MustCompile(`^(~|\$home)/(\.ssh/|\.(bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)$)`)

// projectEnvFile is a project's .env file (.env, .env.local, ...).
var projectEnvFile = regexp.MustCompile(`(^|/)\.env(\.[a-z0-9_-]+)?$`)

var (
	redirectTarget = regexp.MustCompile(`>>? ?(\S+)`)
	writerCommand  = regexp.MustCompile(`^(tee|cp|mv|install|sed|perl|ruby)$`)
)

// classifyDestinations flags a command line that writes one of the files
// above: by redirection, tee, cp/mv/install into it, or an in-place edit.
func classifyDestinations(flat string) classification {
	var targets []string
	for _, m := range redirectTarget.FindAllStringSubmatch(flat, -1) {
		targets = append(targets, m[1])
	}
	for _, seg := range segments(flat) {
		targets = append(targets, writtenFiles(strings.Fields(seg))...)
	}
	for _, t := range targets {
		if c := classifyTarget(t); c.verdict != safeCommand {
			return c
		}
	}
	return classification{}
}

// classifyTarget judges one file a command writes.
func classifyTarget(t string) classification {
	switch {
	case strings.HasPrefix(t, "/dev/") && deviceWrite.MatchString(">"+t):
		return classification{alwaysBlocked, "writes onto a block device"}
	case sensitiveFile.MatchString(t):
		return classification{needsApproval, "overwrites a login, shell start-up or credential file (" + t + ")"}
	case projectEnvFile.MatchString(t):
		return classification{needsApproval, "overwrites a .env file of secrets (" + t + ")"}
	case strings.HasPrefix(t, "/etc/"):
		return classification{needsApproval, "overwrites system configuration under /etc"}
	}
	return classification{}
}

// writtenFiles lists the files a simple command writes: tee's arguments,
// the destination of cp, mv and install, and the files of an in-place edit.
func writtenFiles(words []string) []string {
	if len(words) < 2 || !writerCommand.MatchString(words[0]) {
		return nil
	}
	args := nonFlags(words[1:])
	switch words[0] {
	case "tee":
		return args
	case "cp", "mv", "install":
		if len(args) > 0 {
			return args[len(args)-1:]
		}
	default: // sed, perl, ruby: only an in-place edit writes
		for _, w := range words[1:] {
			if w == "--in-place" || (strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.Contains(w, "i")) {
				return args
			}
		}
	}
	return nil
}

func nonFlags(words []string) []string {
	var out []string
	for _, w := range words {
		if !strings.HasPrefix(w, "-") {
			out = append(out, w)
		}
	}
	return out
}

// chmodOptions are chmod's own options; any other word starting with "-"
// is a mode (chmod -w file).
var chmodOptions = set("-R", "-f", "-v", "-c", "--recursive", "--silent", "--quiet", "--verbose", "--changes",
	"--no-preserve-root", "--preserve-root", "-Rf", "-fR", "-Rv", "-vR", "-Rc", "-cR")

var (
	symbolicMode  = regexp.MustCompile(`^[ugoa]*([-+=][rwxXstugo]*)+$`)
	numericMode   = regexp.MustCompile(`^[0-7]{1,4}$`)
	modeOperation = regexp.MustCompile(`[-+=][rwxXstugo]*`)
)

// classifyChmod reads chmod's mode, numeric or symbolic, and flags one that
// lets everyone write (o+w, a=rwx, 777, 1777, 0666); on / recursively it is
// never allowed. Without who (chmod +w) the umask applies: not flagged.
func classifyChmod(words []string) classification {
	recursive, mode, targets := false, "", []string{}
	for _, w := range words {
		switch {
		case chmodOptions[w] || strings.HasPrefix(w, "--"):
			recursive = recursive || !strings.HasPrefix(w, "--") && strings.Contains(w, "R") || isLongOption(w, "recursive")
		case mode == "":
			mode = w
		default:
			targets = append(targets, w)
		}
	}
	if !worldWritable(mode) {
		return classification{}
	}
	for _, t := range targets {
		if recursive && isRootTarget(t) {
			return classification{alwaysBlocked, "opens the whole filesystem to everyone (chmod -R " + mode + " /)"}
		}
	}
	return classification{needsApproval, "makes files writable by everyone (chmod " + mode + ")"}
}

func worldWritable(mode string) bool {
	if numericMode.MatchString(mode) {
		last := mode[len(mode)-1] - '0'
		return last&2 != 0
	}
	for _, clause := range strings.Split(mode, ",") {
		if !symbolicMode.MatchString(clause) {
			continue
		}
		who := clause[:len(clause)-len(strings.TrimLeft(clause, "ugoa"))]
		if !strings.ContainsAny(who, "oa") {
			continue
		}
		for _, op := range modeOperation.FindAllString(clause[len(who):], -1) {
			if op[0] != '-' && strings.ContainsAny(op[1:], "wugo") {
				return true
			}
		}
	}
	return false
}
