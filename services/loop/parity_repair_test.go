package loop

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hermes' tool-name repair table (tests/run_agent/test_repair_tool_call_name.py,
// HERMES-TESTS.md §2 table (d)), against the same valid set.
func TestParityRepairToolNameTable(t *testing.T) {
	known := []string{"todo", "patch", "browser_click", "browser_navigate", "web_search", "read_file",
		"write_file", "terminal", "execute_code", "session_search"}
	cases := []struct{ in, want string }{
		{"browser_click", "browser_click"},
		{"TERMINAL", "terminal"},
		{"web-search", "web_search"},
		{"write file", "write_file"},
		{"terminall", "terminal"},
		{"xyz_no_such_tool", ""},
		{"BrowserClick", "browser_click"},
		{"BrowserClick_tool", "browser_click"},
		{"PatchTool", "patch"},
		{"TodoTool_tool", "todo"},
		{"Patch_tool", "patch"},
		{"patch-tool", "patch"},
		{"ReadFile_tool", "read_file"},
		{"WriteFileTool", "write_file"},
		{"write-file_Tool", "write_file"},
		{"", ""},
		{"_tool", ""},
		{"ThisIsNotRemotelyARealToolName_tool", ""},
		{`terminal" parameter="command" string="true`, "terminal"},
		{`execute_code" parameter="code" string="true`, "execute_code"},
		{`session_search" parameter="session_id" string="true`, "session_search"},
		{`BrowserClick_tool" parameter="selector" string="true`, "browser_click"},
		{`terminal"`, "terminal"},
		{`terminal<parameter=command`, "terminal"},
		{`terminal' parameter='command' string='true`, "terminal"},
		{`no_such_tool" parameter="x" string="true`, ""},
		{`"terminal"`, "terminal"}, // a leading quote is not cut: the close match finds it
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := RepairToolName(tc.in, known)
			require.Equal(t, tc.want != "", ok, "repaired to %q", got)
			if ok {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

// A name that repaired to no tool goes back to the provider in the shape
// providers accept (OpenAI answers a history with another name with 400
// "string does not match pattern"; HERMES-TESTS.md §8 has that message).
func TestWireToolName(t *testing.T) {
	for in, want := range map[string]string{
		"read_file":      "read_file",
		"launch-rockets": "launch-rockets",
		`no_such_tool" parameter="x" string="true`: "no_such_tool__parameter__x__string__true",
		"":                      "unknown_tool",
		"工具":                    "unknown_tool",
		strings.Repeat("a", 80): strings.Repeat("a", 64),
	} {
		require.Equal(t, want, WireToolName(in), "%q", in)
	}
}
