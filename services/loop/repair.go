package loop

import (
	"encoding/json"
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
