package loop

import (
	"encoding/json"
	"fmt"
	"strings"
)

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

// WireArgs is what a call's arguments become in every copy sent back to a
// provider: the repaired object, or {} when there is none (the tool result
// then says what was wrong).
func WireArgs(raw string) string {
	if args, err := RepairArgs(raw); err == nil {
		return args
	}
	return "{}"
}

// isObject reports whether s is a JSON object, as asObject would find,
// mostly without decoding it: every history's tool calls are checked on
// every request. Valid JSON fails to decode only for a number a float64
// cannot hold, which needs an exponent or hundreds of digits; arguments
// with such a number are decoded to tell.
func isObject(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	if t == "" || t[0] != '{' || !json.Valid([]byte(t)) {
		return false
	}
	inString, escaped, digits := false, false, 0
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString, digits = true, 0
		case c >= '0' && c <= '9':
			if digits++; digits > 300 {
				_, ok := asObject(s)
				return ok
			}
		case c == '.':
		case (c == 'e' || c == 'E') && digits > 0:
			_, ok := asObject(s)
			return ok
		default:
			digits = 0
		}
	}
	return true
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

// jsonText follows a walk through JSON text byte by byte, knowing whether
// it is inside a string.
type jsonText struct{ inStr, esc bool }

// inString takes the next byte and reports whether it belongs to a string,
// its quotes included.
func (j *jsonText) inString(c byte) bool {
	if j.inStr {
		switch {
		case j.esc:
			j.esc = false
		case c == '\\':
			j.esc = true
		case c == '"':
			j.inStr = false
		}
		return true
	}
	j.inStr = c == '"'
	return j.inStr
}

// removeTrailingCommas drops commas directly before a closing bracket,
// outside strings.
func removeTrailingCommas(s string) string {
	var b strings.Builder
	var text jsonText
	for i := 0; i < len(s); i++ {
		c := s[i]
		if text.inString(c) {
			b.WriteByte(c)
			continue
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
	var text jsonText
	for i := 0; i < len(s); i++ {
		c := s[i]
		if text.inString(c) {
			b.WriteByte(c)
			continue
		}
		switch c {
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
