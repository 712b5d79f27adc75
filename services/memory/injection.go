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
}

// hiddenRunes are characters that are invisible when displayed but can
// smuggle instructions past a reader.
var hiddenRunes = map[rune]string{
	'\u200b': "zero-width space", '\u200c': "zero-width non-joiner", '\u200d': "zero-width joiner",
	'\u2060': "word joiner", '\ufeff': "byte-order mark", '\u00ad': "soft hyphen",
	'\u202a': "bidi embedding", '\u202b': "bidi embedding", '\u202c': "bidi pop",
	'\u202d': "bidi override", '\u202e': "bidi override", '\u2066': "bidi isolate",
	'\u2067': "bidi isolate", '\u2068': "bidi isolate", '\u2069': "bidi isolate",
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
