package toolrunner

import (
	"strings"
)

// A model's old_string often differs from the file only in ways it cannot
// see: indentation, runs of spaces, typographic quotes and dashes. When the
// exact text is absent, patch tries these looser matches in order (the
// first strategies of Hermes' tools/fuzzy_match.py), each of which must
// still find the text exactly once unless replace_all is set.

// looseMatch is where a loose strategy found old_string: byte ranges of the
// file, and the replacement for each (re-indented to the file's level).
type looseMatch struct {
	how    string
	ranges [][2]int
	repl   []string
}

func findLoose(text, oldS, newS string) (looseMatch, bool) {
	if m := unicodeMatch(text, oldS, newS); len(m.ranges) > 0 {
		return m, true
	}
	for _, s := range []struct {
		how  string
		norm func(string) string
	}{
		{"ignoring indentation and trailing spaces", strings.TrimSpace},
		{"ignoring differences in spacing", func(l string) string { return strings.Join(strings.Fields(l), " ") }},
	} {
		if m := lineMatch(text, oldS, newS, s.norm); len(m.ranges) > 0 {
			m.how = s.how
			return m, true
		}
	}
	return looseMatch{}, false
}

// asciiPunct folds the typographic characters models swap for plain ones;
// one rune becomes one rune, so offsets carry over.
var asciiPunct = strings.NewReplacer("\u2018", "'", "\u2019", "'", "\u201c", `"`, "\u201d", `"`,
	"\u2013", "-", "\u2014", "-", "\u00a0", " ")

func unicodeMatch(text, oldS, newS string) looseMatch {
	runes := []rune(text)
	folded := []rune(asciiPunct.Replace(text))
	want := []rune(asciiPunct.Replace(oldS))
	if len(folded) != len(runes) || len(want) == 0 {
		return looseMatch{}
	}
	var m looseMatch
	for i := 0; i+len(want) <= len(folded); i++ {
		if string(folded[i:i+len(want)]) == string(want) {
			start := len(string(runes[:i]))
			m.ranges = append(m.ranges, [2]int{start, start + len(string(runes[i:i+len(want)]))})
			m.repl = append(m.repl, newS)
			i += len(want) - 1
		}
	}
	m.how = "after folding typographic quotes and dashes"
	return m
}

// lineMatch finds whole-line blocks of text whose lines equal old_string's
// under norm, and re-indents new_string from old_string's indentation to
// the block's.
func lineMatch(text, oldS, newS string, norm func(string) string) looseMatch {
	lines := strings.SplitAfter(text, "\n")
	want := strings.Split(strings.TrimSuffix(oldS, "\n"), "\n")
	var m looseMatch
	offset := 0
	starts := make([]int, len(lines)+1)
	for i, l := range lines {
		starts[i] = offset
		offset += len(l)
	}
	starts[len(lines)] = offset
	for i := 0; i+len(want) <= len(lines); i++ {
		if !blockEqual(lines[i:i+len(want)], want, norm) {
			continue
		}
		end := starts[i+len(want)]
		block := text[starts[i]:end]
		repl := reindent(newS, indentOf(want[0]), indentOf(lines[i]))
		if strings.HasSuffix(block, "\n") && !strings.HasSuffix(repl, "\n") {
			repl += "\n"
		}
		m.ranges = append(m.ranges, [2]int{starts[i], end})
		m.repl = append(m.repl, repl)
		i += len(want) - 1
	}
	return m
}

func blockEqual(lines, want []string, norm func(string) string) bool {
	for k, w := range want {
		if norm(strings.TrimSuffix(lines[k], "\n")) != norm(w) {
			return false
		}
	}
	return strings.TrimSpace(strings.Join(want, "")) != ""
}

func indentOf(line string) string {
	return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
}

// reindent moves every line of s that starts with from to start with to.
func reindent(s, from, to string) string {
	if from == to {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, from) && strings.TrimSpace(l) != "" {
			lines[i] = to + strings.TrimPrefix(l, from)
		}
	}
	return strings.Join(lines, "\n")
}

// apply replaces m's ranges, last first so earlier offsets stay valid.
func (m looseMatch) apply(text string) string {
	for i := len(m.ranges) - 1; i >= 0; i-- {
		r := m.ranges[i]
		text = text[:r[0]] + m.repl[i] + text[r[1]:]
	}
	return text
}
