package toolrunner

import (
	"strings"
	"testing"
)

// FuzzClassifyCommand: any line gets a verdict with a reason, the
// classifier never fails on it (a failure would only fail closed, but it is
// a bug), and running a line after `true &&` never lowers its verdict.
//
//	go test -run '^$' -fuzz FuzzClassifyCommand -fuzztime 60s ./services/toolrunner
func FuzzClassifyCommand(f *testing.F) {
	for _, list := range [][]string{evasions, everyday, parityDangerous, paritySafe, parityHardlineBlock} {
		for _, c := range list {
			f.Add(c)
		}
	}
	f.Fuzz(func(t *testing.T, command string) {
		got := classifyCommand(command)
		if strings.Contains(got.reason, "classifier error") {
			t.Fatalf("%q: %s", command, got.reason)
		}
		if got.verdict != safeCommand && got.reason == "" {
			t.Fatalf("%q: verdict %d without a reason", command, got.verdict)
		}
		if len(command) < maxLine-16 && !strings.ContainsAny(command, "\\'\"#`\n") {
			if chained := classifyCommand("true && " + command); chained.verdict < got.verdict {
				t.Fatalf("%q: %d, after true &&: %d (%s)", command, got.verdict, chained.verdict, chained.reason)
			}
		}
	})
}
