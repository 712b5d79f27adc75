package memory

import (
	"regexp"
	"strings"
)

// threat is one pattern of text that tries to steer the model from inside
// memory, which is replayed into every future system prompt.
type threat struct {
	name string
	re   *regexp.Regexp
}

var threats = []threat{
	{"instruction override", regexp.MustCompile(`(?i)\b(ignore|forget|override)\s+(all\s+|any\s+|the\s+|your\s+)?(previous|prior|above|earlier|preceding|system)\s+(instructions|prompts?|rules|directions|messages)`)},
	{"rule override", regexp.MustCompile(`(?i)\bdisregard\s+(all\s+|any\s+|the\s+|your\s+|previous\s+|prior\s+)*(rules|instructions|guidelines|prompts?|policies)`)},
	{"system prompt override", regexp.MustCompile(`(?i)system\s+prompt\s+(override|replacement|injection)|new\s+system\s+prompt`)},
	{"concealment from the user", regexp.MustCompile(`(?i)\b(do\s+not|don'?t|never)\s+(tell|inform|mention\s+to|reveal\s+to|let)\s+the\s+user`)},
	{"role hijack", regexp.MustCompile(`(?i)\byou\s+are\s+now\s+(a|an|in|no\s+longer)\b|\bpretend\s+(that\s+)?you\s+have\s+no\s+(rules|restrictions|limits)`)},
	{"restriction bypass", regexp.MustCompile(`(?i)\bact\s+as\s+(if|though)\s+you\s+(have\s+no|don'?t\s+have)\s+(restrictions|rules|limits)`)},
	{"secret exfiltration", regexp.MustCompile(`(?i)\b(curl|wget)\b[^\n]*(\$\{?[A-Z_]*(KEY|TOKEN|SECRET|PASSWORD)|\.env\b|credentials)`)},
	{"ssh backdoor", regexp.MustCompile(`(?i)authorized_keys`)},
	{"fake role marker", regexp.MustCompile(`(?i)(^|\n)\s*(<\|im_start\|>|\[/?(system|inst)\]|<\/?system>)`)},
	// The rest follow the kinds of Hermes' threat table (tools/threat_patterns.py,
	// HERMES-TESTS.md §12): filler words between the key words do not hide them.
	{"instruction override", regexp.MustCompile(`(?i)\bignore\s+(\w+\s+)*(previous|all|above|prior)\s+(\w+\s+)*instructions`)},
	{"rule override", regexp.MustCompile(`(?i)\bdisregard\s+(\w+\s+)*(your|all|any)\s+(\w+\s+)*(instructions|rules|guidelines)`)},
	{"role hijack", regexp.MustCompile(`(?i)\byou\s+are\s+(\w+\s+)*now\s+(a|an|the)\s+`)},
	{"role hijack", regexp.MustCompile(`(?i)\bpretend\s+(\w+\s+)*(you\s+are|to\s+be)\s+`)},
	{"system prompt leak", regexp.MustCompile(`(?i)\boutput\s+(\w+\s+)*(system|initial)\s+prompt`)},
	{"restriction bypass", regexp.MustCompile(`(?i)\b(respond|answer|reply)\s+without\s+(\w+\s+)*(restrictions|limitations|filters|safety)`)},
	{"fake update", regexp.MustCompile(`(?i)\byou\s+have\s+been\s+(\w+\s+)*(updated|upgraded|patched)\s+to\b`)},
	{"hidden instruction", regexp.MustCompile(`(?i)<!--[^>]*(ignore|override|system|secret|hidden)[^>]*-->`)},
	{"hidden instruction", regexp.MustCompile(`(?i)<div\s+style\s*=\s*["'][^"']*display\s*:\s*none`)},
	{"execution request", regexp.MustCompile(`(?i)\btranslate\s+.*\binto\s+.*\band\s+(execute|run|eval)\b`)},
	{"secret exfiltration", regexp.MustCompile(`(?i)\bcat\s+[^\n]*(\.env\b|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)`)},
	{"data exfiltration", regexp.MustCompile(`(?i)\b(send|post|upload|transmit)\s+.*\b(to|at)\s+https?://`)},
	{"context exfiltration", regexp.MustCompile(`(?i)\b(include|output|print|share)\s+(\w+\s+)*(conversation|chat\s+history|previous\s+messages|full\s+context|entire\s+context)`)},
	{"ssh access", regexp.MustCompile(`(?i)(\$HOME|~)/\.ssh\b`)},
	{"agent instructions tampering", regexp.MustCompile(`(?i)\b(update|modify|edit|write|change|append|add\s+to)\s+(\w+\s+)*(AGENTS\.md|CLAUDE\.md|\.cursorrules|\.clinerules)`)},
	{"hard-coded secret", regexp.MustCompile(`(?i)\b(api[_-]?key|token|secret|password)\s*[=:]\s*["'][A-Za-z0-9+/=_-]{20,}`)},
}

// hiddenRunes are characters that are invisible when displayed but can
// smuggle instructions past a reader.
var hiddenRunes = map[rune]string{
	'\u200b': "zero-width space", '\u200c': "zero-width non-joiner", '\u200d': "zero-width joiner",
	'\u2060': "word joiner", '\ufeff': "byte-order mark", '\u00ad': "soft hyphen",
	'\u202a': "bidi embedding", '\u202b': "bidi embedding", '\u202c': "bidi pop",
	'\u202d': "bidi override", '\u202e': "bidi override", '\u2066': "bidi isolate",
	'\u2067': "bidi isolate", '\u2068': "bidi isolate", '\u2069': "bidi isolate",
	'\u2062': "invisible times", '\u2063': "invisible separator", '\u2064': "invisible plus",
}

// scanInjection names what makes text unsafe to replay into a system
// prompt, or returns "" when nothing does.
func scanInjection(text string) string {
	for _, r := range text {
		if name, ok := hiddenRunes[r]; ok {
			return "hidden unicode character (" + name + ")"
		}
		if r >= 0xE0000 && r <= 0xE007F {
			return "hidden unicode tag character"
		}
	}
	normalized := strings.Join(strings.Fields(text), " ")
	for _, t := range threats {
		if t.re.MatchString(text) || t.re.MatchString(normalized) {
			return t.name
		}
	}
	return ""
}
