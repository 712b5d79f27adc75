package toolrunner

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// verdict is how a shell command is treated before it runs.
type verdict int

const (
	safeCommand   verdict = iota
	needsApproval         // dangerous: runs only when approved
	alwaysBlocked         // never runs, whatever the approval
)

// classification is a verdict and the reason a person reads.
type classification struct {
	verdict verdict
	reason  string
}

// classifyCommand judges a terminal command before it runs. The line is
// parsed as bash parses it and every simple command in the tree is judged
// (see patterns_shell.go); the whole-line patterns below catch what spans
// commands. A line that does not parse fails closed: it needs approval,
// and the old word-splitting rules still block what they recognise.
func classifyCommand(command string) classification {
	return classifyLine(command, 0)
}

// maxLine and maxBrackets bound the line the classifier reads: its cost
// grows faster than the line with deep nesting, and a line it cannot read
// must not run, even with approvals off (padding would hide rm -rf /).
const (
	maxLine     = 64 << 10
	maxBrackets = 1024
)

func classifyLine(command string, depth int) classification {
	command = visibleCommand(command)
	if len(command) > maxLine || strings.Count(command, "(")+strings.Count(command, "{")+strings.Count(command, "`") > maxBrackets {
		return classification{alwaysBlocked, fmt.Sprintf("is longer than %d KiB or nests more than %d brackets, more than the approval check reads (put long content in a file with write_file)", maxLine>>10, maxBrackets)}
	}
	flat := normalizeCommand(command)
	worst := classification{}
	consider := func(c classification) {
		if c.verdict > worst.verdict {
			worst = c
		}
	}
	parsed, ok := classifyParsed(command, depth)
	consider(parsed)
	if ok {
		consider(classifyWhole(command, flat))
	} else {
		consider(classifyWords(command))
	}
	return worst
}

// classifyWords is the check before commands were parsed: patterns over
// the line split at separators, with quotes and wrappers stripped. It
// stands behind the parser where the parser gives up (a line that does not
// parse, nesting or work beyond its bounds), so what it blocks stays
// blocked there.
func classifyWords(command string) classification {
	command = visibleCommand(command)
	flat := normalizeCommand(command)
	worst := classifyWhole(command, flat)
	consider := func(c classification) {
		if c.verdict > worst.verdict {
			worst = c
		}
	}
	for _, part := range splitCommands(flat) {
		consider(classifySudo(strings.Fields(part)))
	}
	for _, seg := range segments(flat) {
		consider(classifySegment(seg))
	}
	return worst
}

var whitespace = regexp.MustCompile(`\s+`)

// normalizeCommand lowercases, drops quoting and collapses spaces.
func normalizeCommand(command string) string {
	s := strings.ToLower(command)
	s = strings.NewReplacer(`'`, "", `"`, "", `\`+"\n", " ", `\`, "").Replace(s)
	return strings.TrimSpace(whitespace.ReplaceAllString(s, " "))
}

var separators = regexp.MustCompile("&&|\\|\\||[;|&\n`(){}]|\\$\\(")

// callBefore is the word written right before a "(": a function call
// such as print("shutdown") in an interpreter's code, whose argument is
// not a command. Shell keywords before "(" (then(rm -rf /)) still open one.
// (A backward scan: a regexp anchored at the end would rescan the line
// for every "(", quadratic in its length.)
func callBefore(s string) string {
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			break
		}
		i--
	}
	return s[i:]
}

var shellKeywords = map[string]bool{"then": true, "do": true, "else": true, "elif": true, "if": true,
	"while": true, "until": true, "time": true, "exec": true}

// splitCommands splits a normalized line into simple commands at the
// separators, except at a "(" that calls a function.
func splitCommands(flat string) []string {
	var parts []string
	start := 0
	for _, m := range separators.FindAllStringIndex(flat, -1) {
		if flat[m[0]:m[1]] == "(" {
			if w := callBefore(flat[:m[0]]); w != "" && !shellKeywords[w] {
				continue
			}
		}
		parts = append(parts, flat[start:m[0]])
		start = m[1]
	}
	return append(parts, flat[start:])
}

// segments splits a normalized line into simple commands, each with its
// leading wrappers removed.
func segments(flat string) []string {
	var out []string
	for _, part := range splitCommands(flat) {
		if seg := stripWrappers(strings.Fields(part)); len(seg) > 0 {
			out = append(out, strings.Join(seg, " "))
		}
	}
	return out
}

// wrappers run the command that follows them; their own flags are skipped.
var segmentWrappers = map[string]bool{"sudo": true, "doas": true, "env": true, "nohup": true, "nice": true,
	"time": true, "command": true, "exec": true, "builtin": true, "xargs": true, "eval": true,
	"timeout": true, "stdbuf": true, "ionice": true, "su": true, "setsid": true}

func stripWrappers(words []string) []string {
	for len(words) > 0 {
		w := path.Base(words[0])
		switch {
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
			words = words[1:] // VAR=value
		case segmentWrappers[w]:
			words = skipFlags(words[1:], w == "timeout")
		case shells[w] && len(words) > 1 && strings.HasPrefix(words[1], "-") && strings.Contains(words[1], "c"):
			words = words[2:]
		default:
			words[0] = w
			return words
		}
	}
	return nil
}

// skipFlags drops a wrapper's options (and timeout's duration).
func skipFlags(words []string, durationArg bool) []string {
	for len(words) > 0 && (strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "=")) {
		if (words[0] == "-u" || words[0] == "-n" || words[0] == "-c") && len(words) > 1 {
			words = words[1:]
		}
		words = words[1:]
	}
	if durationArg && len(words) > 0 {
		words = words[1:]
	}
	return words
}

// rule matches one simple command (anchored at its first word).
type rule struct {
	re     *regexp.Regexp
	reason string
}

func rules(v verdict, pairs ...string) []classificationRule {
	out := make([]classificationRule, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, classificationRule{rule{regexp.MustCompile(pairs[i]), pairs[i+1]}, v})
	}
	return out
}

type classificationRule struct {
	rule
	verdict verdict
}

var blockDevice = `/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|md|dm-|mapper/|loop|root)`

var segmentRules = append(rules(alwaysBlocked,
	`^mkfs(\.[a-z0-9]+)?( |$)`, "formats a filesystem",
	`^(mke2fs|mkswap|wipefs)( |$)`, "formats or wipes a device",
	`^dd .*\bof=`+blockDevice, "dd onto a block device",
	`^(shutdown|reboot|halt|poweroff)( |$)`, "shuts down or restarts the machine",
	`^(init|telinit) [06]( |$)`, "shuts down or restarts the machine",
	`^systemctl (poweroff|reboot|halt|kexec)( |$)`, "shuts down or restarts the machine",
	`^kill( -[a-z0-9]+)* (-- )?-1$`, "kills every process the user can signal",
	`^chmod (-r|--recursive) [0-7]*7[0-7]* /$`, "opens the whole filesystem to everyone",
), rules(needsApproval,
	`^find .*(-delete|-exec(dir)? (\S*/)?rm\b)`, "deletes files recursively (find)",
	`^dd .*\bif=`+blockDevice, "copies a raw disk (dd from a block device)",
	`^chmod .*(\b777\b|\b[0-7]?77[0-7]\b|a\+rwx|ugo\+rwx)`, "makes files writable by everyone (chmod 777)",
	`^(chown|chgrp) (.* )?(-[a-z]*r[a-z]*|--recursive)( |$)`, "changes ownership recursively",
	`^git .*\breset .*--hard`, "discards uncommitted work (git reset --hard)",
	`^git .*\bpush\b.*( -[a-z0-9]*f| --force| --mirror\b| \+[^ ])`, "rewrites remote history (force push)",
	`^git .*\bclean .*-[a-z]*f`, "deletes untracked files (git clean -f)",
	`^git .*\bbranch (.* )?(-d|--delete)( |$)`, "deletes a branch",
	`^(pkill|killall)( |$)`, "kills processes by name",
	`^kill -(9|kill|sigkill)( |$)`, "force-kills processes",
	`^systemctl (stop|disable|mask) `, "stops a system service",
	`^crontab -r`, "removes the crontab",
	`^mv .* /dev/null$`, "moves files into /dev/null",
	`^truncate .*(-s ?0|--size[= ]0)`, "empties files",
)...)

// anywhereRules match inside any simple command (SQL in a client's argument).
var anywhereRules = rules(needsApproval,
	`\bdrop (table|database|schema)\b`, "drops a database object (DROP)",
	`\btruncate table\b`, "empties a table (TRUNCATE)",
)

var deleteFrom = regexp.MustCompile(`\bdelete from\b`)
var where = regexp.MustCompile(`\bwhere\b`)

// harmless are the read-only forms of commands the rules flag.
var harmless = regexp.MustCompile(`^killall (-l|-v|--list|--version)$`)

func classifySegment(seg string) classification {
	words := canonicalOptions(strings.Fields(seg))
	seg = strings.Join(words, " ")
	if c := classifyRm(words); c.verdict != safeCommand {
		return c
	}
	if harmless.MatchString(seg) {
		return classification{}
	}
	worst := classification{}
	for _, r := range append(segmentRules, anywhereRules...) {
		if r.verdict > worst.verdict && r.re.MatchString(seg) {
			worst = classification{r.verdict, r.reason}
		}
	}
	if worst.verdict == safeCommand && deleteFrom.MatchString(seg) && !where.MatchString(seg) {
		worst = classification{needsApproval, "deletes every row of a table (DELETE without WHERE)"}
	}
	return worst
}

// classifyRm: any recursive rm needs approval; one aimed at the root is blocked.
func classifyRm(words []string) classification {
	if len(words) == 0 || words[0] != "rm" {
		return classification{}
	}
	recursive, root, system := false, false, ""
	for _, w := range words[1:] {
		switch {
		case w == "--recursive" || w == "--no-preserve-root":
			recursive = recursive || w == "--recursive"
			root = root || w == "--no-preserve-root"
		case strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.Contains(w, "r"):
			recursive = true
		case isRootTarget(w):
			root = true
		case isSystemTarget(w):
			system = w
		}
	}
	switch {
	case recursive && root:
		return classification{alwaysBlocked, "deletes the whole filesystem (rm -rf /)"}
	case recursive && system != "":
		return classification{alwaysBlocked, "deletes a system or home directory (rm -rf " + system + ")"}
	case recursive:
		return classification{needsApproval, "deletes files recursively (rm -r)"}
	}
	return classification{}
}

func isRootTarget(w string) bool {
	switch strings.TrimRight(w, "*") {
	case "/", "/.", "/..", "":
		return strings.HasPrefix(w, "/")
	}
	return false
}

// systemDirs are directories whose recursive deletion is never allowed:
// the system's own, and the home directory itself.
var systemDirs = regexp.MustCompile(`^(/(home|root|etc|usr|var|bin|sbin|boot|lib)|~|\$home|\$\{home\})/?\*?$`)

func isSystemTarget(w string) bool { return systemDirs.MatchString(w) }

var (
	pipeToShell   = regexp.MustCompile(`\b(curl|wget|fetch)\b[^;&]*\| ?(sudo )?(\S*/)?(ba|z|da|k)?sh\b`)
	shellFromURL  = regexp.MustCompile(`\b(ba|z|da|k)?sh (-c )?(< ?)?(<\(|\$\() ?(curl|wget)\b`)
	deviceWrite   = regexp.MustCompile(`>>? ?` + blockDevice)
	systemWrite   = regexp.MustCompile(`(>>? ?|\btee (-a )?)/etc/`)
	killByName    = regexp.MustCompile(`\bkill\b[^;&|]*(\$\(|` + "`" + `) ?pgrep\b`)
	forkBombShape = regexp.MustCompile(`([a-z_:][a-z0-9_:]*)\(\)\{([a-z_:][a-z0-9_:]*)\|([a-z_:][a-z0-9_:]*)&\};([a-z_:][a-z0-9_:]*)`)
)

// classifyWhole catches what spans simple commands: pipes into a shell,
// redirections and fork bombs.
func classifyWhole(raw, flat string) classification {
	if isForkBomb(raw) {
		return classification{alwaysBlocked, "a fork bomb"}
	}
	switch {
	case deviceWrite.MatchString(flat):
		return classification{alwaysBlocked, "writes onto a block device"}
	case pipeToShell.MatchString(flat) || shellFromURL.MatchString(flat):
		return classification{needsApproval, "runs a script downloaded from the network (curl | sh)"}
	case systemWrite.MatchString(flat):
		return classification{needsApproval, "overwrites system configuration under /etc"}
	case killByName.MatchString(flat):
		return classification{needsApproval, "kills processes found by name (kill $(pgrep …))"}
	}
	return classifyDestinations(flat)
}

func isForkBomb(raw string) bool {
	compact := whitespace.ReplaceAllString(strings.ToLower(raw), "")
	for _, m := range forkBombShape.FindAllStringSubmatch(compact, -1) {
		if m[1] == m[2] && m[2] == m[3] && m[3] == m[4] {
			return true
		}
	}
	return false
}
