// Package redact removes configured secrets (provider API keys, the values
// an MCP server's entry hands it) from text that leaves Herald's hands:
// error messages, logs, events, tool output. A provider's error may echo
// a key in part (without its prefix, cut short, masked in the middle), so
// a secret is found not only whole but by any run of MinRun or more of its
// consecutive characters.
package redact

import "strings"

// MinRun is the shortest run of a secret's consecutive characters that is
// redacted wherever it appears. Shorter runs are too likely to be ordinary
// text; a secret shorter than MinRun is redacted only whole.
const MinRun = 12

// Secrets is a set of secret values to remove from text. The zero value
// removes nothing.
type Secrets struct {
	whole []string            // secrets shorter than MinRun
	grams map[string]struct{} // every MinRun-long run of the longer ones
}

// New is the set of secrets; empty strings are ignored.
func New(secrets ...string) Secrets {
	s := Secrets{grams: map[string]struct{}{}}
	for _, v := range secrets {
		switch {
		case v == "":
		case len(v) < MinRun:
			s.whole = append(s.whole, v)
		default:
			for i := 0; i+MinRun <= len(v); i++ {
				s.grams[v[i:i+MinRun]] = struct{}{}
			}
		}
	}
	return s
}

// Empty reports whether there is nothing to remove.
func (s Secrets) Empty() bool { return len(s.whole) == 0 && len(s.grams) == 0 }

// Replace returns text with every whole secret, and every run of MinRun or
// more consecutive characters of one, replaced by mark. Overlapping and
// adjacent runs become one mark.
func (s Secrets) Replace(text, mark string) string {
	for _, w := range s.whole {
		text = strings.ReplaceAll(text, w, mark)
	}
	if len(s.grams) == 0 || len(text) < MinRun {
		return text
	}
	// covered[i]: byte i of text is inside a run of a secret. Every run of
	// MinRun or more characters is a chain of overlapping MinRun-grams.
	var covered []bool
	for i := 0; i+MinRun <= len(text); i++ {
		if _, ok := s.grams[text[i:i+MinRun]]; ok {
			if covered == nil {
				covered = make([]bool, len(text))
			}
			for j := i; j < i+MinRun; j++ {
				covered[j] = true
			}
		}
	}
	if covered == nil {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		if !covered[i] {
			b.WriteByte(text[i])
			i++
			continue
		}
		b.WriteString(mark)
		for i < len(text) && covered[i] {
			i++
		}
	}
	return b.String()
}

// String is Replace with the mark "[redacted]".
func (s Secrets) String(text string) string { return s.Replace(text, "[redacted]") }
