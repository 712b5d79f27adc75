package toolrunner

import (
	"slices"
	"strings"
)

// ruledLongOptions are the long options the rules look for, by program
// (by subcommand for git), written in full.
var ruledLongOptions = map[string][]string{
	"rm":         {"recursive", "no-preserve-root"},
	"chmod":      {"recursive"},
	"chown":      {"recursive"},
	"chgrp":      {"recursive"},
	"truncate":   {"size"},
	"git reset":  {"hard"},
	"git push":   {"force", "mirror"},
	"git clean":  {"force"},
	"git branch": {"delete"},
}

// canonicalOptions writes the long options the rules look for in full.
// getopt_long and git's parse-options take any prefix of a long option
// that names only it (rm --recur, rm --no-pres, git reset --ha), and
// --opt=value. A prefix that names several options makes the program
// refuse to run at all, so reading it as the ruled option only fails
// closed (chown --re, ambiguous with --reference, needs approval).
func canonicalOptions(words []string) []string {
	if len(words) == 0 {
		return words
	}
	out := slices.Clone(words)
	opts := ruledLongOptions[out[0]]
	for i := 1; i < len(out); i++ {
		if sub, ok := ruledLongOptions["git "+out[i]]; ok && out[0] == "git" {
			opts = sub
			continue
		}
		out[i] = expandLong(out[i], opts)
	}
	return out
}

// expandLong returns w as the option of opts it abbreviates, its value
// kept, or w itself.
func expandLong(w string, opts []string) string {
	if !strings.HasPrefix(w, "--") {
		return w
	}
	name, value, hasValue := strings.Cut(w[2:], "=")
	if name == "" {
		return w
	}
	for _, o := range opts {
		if !strings.HasPrefix(o, name) {
			continue
		}
		if hasValue {
			return "--" + o + "=" + value
		}
		return "--" + o
	}
	return w
}

// isLongOption reports whether w is the long option opt, abbreviated or
// with a value.
func isLongOption(w, opt string) bool {
	full := expandLong(strings.ToLower(w), []string{opt})
	return full == "--"+opt || strings.HasPrefix(full, "--"+opt+"=")
}
