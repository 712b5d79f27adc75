package loop

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRepairToolName(t *testing.T) {
	known := []string{"read_file", "write_file", "terminal", "search_files", "todo", "delegate_task"}
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"read_file", "read_file", true},
		{"READ_FILE", "read_file", true},
		{"read-file", "read_file", true},
		{"read file", "read_file", true},
		{"ReadFile", "read_file", true},
		{"readFile", "read_file", true},
		{"terminal_tool", "terminal", true},
		{"TerminalTool", "terminal", true},
		{"search_file", "search_files", true},
		{"writ_file", "write_file", true},
		{"launch_rockets", "", false},
		{"x", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := RepairToolName(tc.in, known)
			require.Equal(t, tc.ok, ok)
			if tc.ok {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

func TestSimilarityMatchesDifflib(t *testing.T) {
	// difflib.SequenceMatcher(None, "search_file", "search_files").ratio()
	require.InDelta(t, 0.9565, similarity("search_file", "search_files"), 0.001)
	require.InDelta(t, 0.0, similarity("abc", "xyz"), 0.001)
	require.Less(t, similarity("launch_rockets", "read_file"), 0.7)
}

func TestRepairArgs(t *testing.T) {
	cases := []struct {
		name, in, want, errHas string
	}{
		{"empty", "", `{}`, ""},
		{"blank", "  ", `{}`, ""},
		{"valid", `{"path":"a.txt"}`, `{"path":"a.txt"}`, ""},
		{"trailing comma", `{"path":"a.txt",}`, `{"path":"a.txt"}`, ""},
		{"nested trailing comma", `{"todos":[{"id":"1",},]}`, `{"todos":[{"id":"1"}]}`, ""},
		{"unclosed brace", `{"path":"a.txt"`, `{"path":"a.txt"}`, ""},
		{"unclosed nested", `{"todos":[{"id":"1"}`, `{"todos":[{"id":"1"}]}`, ""},
		{"extra closing brackets dropped", `{"path":"a.txt"}}`, `{"path":"a.txt"}`, ""},
		{"unclosed string is cut off, never closed", `{"path":"c.txt","content":"hel`, "", "inside a string"},
		{"key without value", `{"path":"c.txt","content"`, "", "after a key"},
		{"colon without value", `{"path":"c.txt","content":`, "", "after a key"},
		{"dangling comma", `{"path":"c.txt",`, "", "after a comma"},
		{"partial literal", `{"replace_all":tru`, "", "inside a value"},
		{"number at the end may have lost digits", `{"limit":10`, "", "inside a value"},
		{"only an opening brace", `{`, "", "opening bracket"},
		{"complete literal then missing brace", `{"replace_all":true`, `{"replace_all":true}`, ""},
		{"comma inside string kept", `{"c":"a,}"}`, `{"c":"a,}"}`, ""},
		{"array", `["a"]`, "", "must be a JSON object, got an array"},
		{"string", `"a"`, "", "got a string"},
		{"garbage", `path=a.txt`, "", "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RepairArgs(tc.in)
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
				var ae *ArgsError
				require.ErrorAs(t, err, &ae)
				return
			}
			require.NoError(t, err)
			require.JSONEq(t, tc.want, got)
		})
	}
}

func TestCanonicalArgsIgnoresKeyOrderAndSpacing(t *testing.T) {
	require.Equal(t, CanonicalArgs(`{"b":1,"a":{"y":2,"x":1}}`), CanonicalArgs(`{ "a": {"x":1, "y":2}, "b": 1 }`))
}

// TestIsObjectAgreesWithDecoding: the check a history's tool calls get on
// every request says what decoding them would.
func TestIsObjectAgreesWithDecoding(t *testing.T) {
	cases := []string{``, ` `, `{}`, ` {"a":1} `, `{"a":1}x`, `{"a":`, `null`, ` null`, `[1]`, `"s"`, `1`, `true`,
		`{"a":1,"a":2}`, "{\"s\":\"\xff\"}", `{"n":1e3,"s":"\u2028é"}`, "\t\n{\"a\":[1,{\"b\":null}]}\r\n", `{,}`, `{"a":1,}`,
		`{"a":01}`, `{"a":"\x01"}`, `{} {}`, "\ufeff{}", `{"a":1e999}`, `{"a":1E3}`, `{"a":-1.5e-3}`, `{"a":"1e999"}`,
		`{"a":"\"1e999"}`, `{"a":true,"b":false}`, `{"a":1` + strings.Repeat("0", 400) + `}`, `{"a":0.` + strings.Repeat("0", 400) + `1}`}
	for _, c := range cases {
		_, want := asObject(c)
		require.Equal(t, want, isObject(c), "%q", c)
	}
}
