package toolrunner

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hermes' patch cases (tests/tools/test_fuzzy_match.py, HERMES-TESTS.md
// §17) through the tool runner: exact first, then typographic folding,
// indentation-blind and spacing-blind whole-line matches.
func TestParityPatchMatching(t *testing.T) {
	cases := []struct {
		name, file, old, new string
		all                  bool
		want, errHas, how    string
	}{
		{"exact", "hello world", "hello", "hi", false, "hi world", "", ""},
		{"absent", "hello world", "xyz", "abc", false, "hello world", "not found", ""},
		{"empty old_string", "hello world", "", "abc", false, "hello world", "old_string", ""},
		{"identical", "hello world", "hello", "hello", false, "hello world", "identical", ""},
		{"two matches need replace_all", "aaa bbb aaa", "aaa", "ccc", false, "aaa bbb aaa", "2 times", ""},
		{"replace_all", "aaa bbb aaa", "aaa", "ccc", true, "ccc bbb ccc", "", ""},
		{"spacing", "def  foo(  x,  y  ):\n    pass\n", "def foo( x, y ):", "def foo(x, y):", false,
			"def foo(x, y):\n    pass\n", "", "spacing"},
		{"indentation, re-indented", "class A:\n    if x:\n        return 1\n", "if x:\n    return 1", "if x:\n    return 2", false,
			"class A:\n    if x:\n        return 2\n", "", "indentation"},
		{"typographic quotes and dashes", "it\u2019s done \u2014 \u201cok\u201d\n", `it's done - "ok"`, "it is done", false,
			"it is done\n", "", "typographic"},
		{"unrelated middle does not match", "first\nmiddle one\nlast\n", "first\nmiddle two\nlast", "x", false,
			"first\nmiddle one\nlast\n", "not found", ""},
	}
	h := newHarness(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(h.cfg.WorkspaceRoot, "f.txt")
			require.NoError(t, os.WriteFile(file, []byte(tc.file), 0o644))
			req := h.request("patch", map[string]any{"path": "f.txt", "old_string": tc.old, "new_string": tc.new, "replace_all": tc.all})
			req.SessionId = fmt.Sprintf("parity-patch-%d", i) // failures of one case do not trip the breaker for the next
			res := h.run(req)
			got, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			if tc.errHas != "" {
				require.True(t, res.GetIsError())
				require.Contains(t, res.GetContent(), tc.errHas)
				return
			}
			require.Equal(t, "ok", res.GetStatus(), res.GetContent())
			require.Contains(t, res.GetContent(), tc.how, "the result says how it matched")
		})
	}
}
