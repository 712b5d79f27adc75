package loop

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// RepairToolName maps a name the model produced to a known tool: markup
// leaked into the name is cut off (at the first quote or angle bracket, as
// in `terminal" parameter="command"`), then case, '-' and spaces to '_',
// CamelCase to snake_case, a 'tool' suffix dropped (up to twice), then the
// closest known name with similarity >= 0.7. ok is false when nothing is
// close enough.
func RepairToolName(name string, known []string) (string, bool) {
	set := map[string]bool{}
	for _, k := range known {
		set[k] = true
	}
	if set[name] {
		return name, true
	}
	if i := strings.IndexAny(name, `"'<>`); i > 0 {
		name = name[:i]
	}
	n := strings.NewReplacer("-", "_", " ", "_").Replace(strings.TrimSpace(name))
	var candidates []string
	for _, c := range []string{strings.ToLower(name), strings.ToLower(n), snake(n)} {
		candidates = append(candidates, c)
		for range 2 {
			c = trimToolSuffix(c)
			candidates = append(candidates, c)
		}
	}
	for _, c := range candidates {
		if set[c] {
			return c, true
		}
	}
	best, bestScore := "", 0.0
	for _, k := range known {
		if score := similarity(strings.ToLower(name), k); score > bestScore {
			best, bestScore = k, score
		}
	}
	return best, bestScore >= 0.7
}

func trimToolSuffix(s string) string {
	for _, suffix := range []string{"_tool", "-tool", "tool"} {
		if t := strings.TrimSuffix(s, suffix); t != s {
			return strings.TrimRight(t, "_-")
		}
	}
	return s
}

func snake(s string) string {
	var b strings.Builder
	runes := []rune(s)
	for i, r := range runes {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// similarity is the ratio of matching characters (Ratcliff/Obershelp, as
// Python's difflib uses).
func similarity(a, b string) float64 {
	if a == "" && b == "" {
		return 1
	}
	return 2 * float64(matching(a, b)) / float64(len(a)+len(b))
}

func matching(a, b string) int {
	if a == "" || b == "" {
		return 0
	}
	bestI, bestJ, bestN := 0, 0, 0
	for i := range a {
		for j := range b {
			n := 0
			for i+n < len(a) && j+n < len(b) && a[i+n] == b[j+n] {
				n++
			}
			if n > bestN {
				bestI, bestJ, bestN = i, j, n
			}
		}
	}
	if bestN == 0 {
		return 0
	}
	return bestN + matching(a[:bestI], b[:bestJ]) + matching(a[bestI+bestN:], b[bestJ+bestN:])
}

// ArgsError explains why arguments could not be used. CutOff marks
// arguments that stop part-way (inside a string, after a key or a comma):
// the model's output ended before the call was complete.
type ArgsError struct {
	Reason string
	CutOff bool
}

func (e *ArgsError) Error() string { return e.Reason }

// RepairArgs returns arguments as a JSON object text: empty becomes {},
// trailing commas are dropped, unclosed brackets closed and extra closing
// brackets removed. Arguments that were cut off are never completed (a
// string is never closed: a file would be written half), and anything else
// that is not a JSON object is an *ArgsError naming what is wrong.
func RepairArgs(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "{}", nil
	}
	if obj, ok := asObject(s); ok {
		return obj, nil
	}
	if where := cutOffAt(s); where != "" {
		return "", &ArgsError{CutOff: true, Reason: "the arguments were cut off before they were complete (they end " + where +
			"), so the call was not run"}
	}
	fixed := closeBrackets(removeTrailingCommas(s))
	if obj, ok := asObject(fixed); ok {
		return obj, nil
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	if err == nil {
		return "", &ArgsError{Reason: fmt.Sprintf("arguments must be a JSON object, got %s", jsonKind(v))}
	}
	return "", &ArgsError{Reason: fmt.Sprintf("arguments are not valid JSON: %v", err)}
}

// wireNamePattern is the shape providers require of a function name, in
// requests and in the history they are sent back (OpenAI and Anthropic both
// refuse a history whose call names do not match it).
var wireNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// WireToolName is a call's name as every copy sent back to a provider
// carries it: the name itself when providers accept it, else the name with
// every other character replaced by '_' (cut to 64), so a name polluted with
// markup that matched no tool cannot get the whole history refused.
func WireToolName(name string) string {
	if wireNamePattern.MatchString(name) {
		return name
	}
	clean := strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-') {
			return r
		}
		return '_'
	}, name)
	clean = strings.Trim(clean, "_")
	if len(clean) > 64 {
		clean = clean[:64]
	}
	if clean == "" {
		return "unknown_tool"
	}
	return clean
}

// WireArgs is what a call's arguments become in every copy sent back to a
// provider: the repaired object, or {} when there is none (the tool result
// then says what was wrong).
func WireArgs(raw string) string {
	if args, err := RepairArgs(raw); err == nil {
		return args
	}
	return "{}"
}

func asObject(s string) (string, bool) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return "", false
	}
	out, _ := json.Marshal(m)
	return string(out), true
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "something else"
}

// cutOffAt says where JSON text that begins an object or array stops
// part-way, or "" when it ends on a complete value (closing brackets may
// still be missing). Text that is not JSON-like at all is not cut off.
func cutOffAt(s string) string {
	if s[0] != '{' && s[0] != '[' {
		return ""
	}
	sc := jsonScan{}
	for i := 0; i < len(s); i++ {
		sc.step(s[i])
	}
	switch {
	case sc.inStr:
		return "inside a string"
	case sc.last == ':':
		return "after a key, before its value"
	case sc.last == ',':
		return "after a comma"
	case sc.last == '{' || sc.last == '[':
		return "just after an opening bracket"
	case sc.last == '"' && sc.lastWasKey:
		return "after a key, before its value"
	case sc.last == 'v' && !completeLiteral(sc.literal.String()):
		return "inside a value"
	}
	return ""
}

// jsonScan tracks, character by character, the last structural token of
// JSON-like text: '"' a string, 'v' a bare literal, or the bracket or
// punctuation itself.
type jsonScan struct {
	inStr, esc bool
	stack      []byte
	last       byte
	lastWasKey bool
	strIsKey   bool
	literal    strings.Builder
}

func (sc *jsonScan) step(c byte) {
	if sc.inStr {
		switch {
		case sc.esc:
			sc.esc = false
		case c == '\\':
			sc.esc = true
		case c == '"':
			sc.inStr, sc.last, sc.lastWasKey = false, '"', sc.strIsKey
		}
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
		return
	case '"':
		sc.inStr = true
		sc.strIsKey = len(sc.stack) > 0 && sc.stack[len(sc.stack)-1] == '{' && (sc.last == '{' || sc.last == ',')
	case '{', '[':
		sc.stack = append(sc.stack, c)
		sc.last = c
	case '}', ']':
		if len(sc.stack) > 0 {
			sc.stack = sc.stack[:len(sc.stack)-1]
		}
		sc.last = c
	case ':', ',':
		sc.last = c
	default:
		if sc.last != 'v' {
			sc.literal.Reset()
		}
		sc.literal.WriteByte(c)
		sc.last = 'v'
	}
}

// completeLiteral is true for a bare value that cannot go on: true, false,
// null. A number at the very end may have lost digits.
func completeLiteral(s string) bool {
	return s == "true" || s == "false" || s == "null"
}

// removeTrailingCommas drops commas directly before a closing bracket,
// outside strings.
func removeTrailingCommas(s string) string {
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			b.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
		}
		if c == ',' {
			j := i + 1
			for j < len(s) && strings.ContainsRune(" \t\r\n", rune(s[j])) {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// closeBrackets closes open brackets and drops closing brackets that close
// nothing. It never closes a string: RepairArgs refuses those first.
func closeBrackets(s string) string {
	var b strings.Builder
	var stack []byte
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			b.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{':
			stack = append(stack, '}')
		case '[':
			stack = append(stack, ']')
		case '}', ']':
			if len(stack) == 0 {
				continue // closes nothing
			}
			stack = stack[:len(stack)-1]
		}
		b.WriteByte(c)
	}
	for i := len(stack) - 1; i >= 0; i-- {
		b.WriteByte(stack[i])
	}
	return b.String()
}

// CanonicalArgs renders arguments with sorted keys, for fingerprints.
func CanonicalArgs(args string) string {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return args
	}
	out, _ := json.Marshal(sortKeys(v))
	return string(out)
}

func sortKeys(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]any, len(m))
	for _, k := range keys {
		out[k] = sortKeys(m[k])
	}
	return out // encoding/json sorts map keys when marshalling
}
