package loop

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func call(tool, args string) PendingCall { return PendingCall{Tool: tool, Args: args} }

func TestSegmentPlan(t *testing.T) {
	barrier := func(c PendingCall) bool { return c.Local || c.Tool == "clarify" }
	cases := []struct {
		name  string
		calls []PendingCall
		want  []int
	}{
		{"reads share a segment", []PendingCall{call("read_file", `{"path":"a"}`), call("search_files", `{"pattern":"x"}`), call("read_file", `{"path":"b"}`)}, []int{0, 0, 0}},
		{"writers on other paths share", []PendingCall{call("write_file", `{"path":"a"}`), call("write_file", `{"path":"b"}`), call("read_file", `{"path":"c"}`)}, []int{0, 0, 0}},
		{"a read of a written path waits", []PendingCall{call("write_file", `{"path":"a"}`), call("read_file", `{"path":"a"}`)}, []int{0, 1}},
		{"a directory overlaps its files", []PendingCall{call("write_file", `{"path":"src/a.go"}`), call("search_files", `{"pattern":"x","path":"src"}`)}, []int{0, 1}},
		{"terminal orders everything", []PendingCall{call("read_file", `{"path":"a"}`), call("terminal", `{"command":"ls"}`), call("read_file", `{"path":"b"}`)}, []int{0, 1, 2}},
		{"clarify is a barrier", []PendingCall{call("read_file", `{"path":"a"}`), call("clarify", `{"question":"?"}`), call("read_file", `{"path":"b"}`)}, []int{0, 1, 2}},
		{"unparseable call is a barrier", []PendingCall{call("read_file", `{"path":"a"}`), {Tool: "read_file", Local: true}, call("read_file", `{"path":"b"}`)}, []int{0, 1, 2}},
		{"delegations share up to three", []PendingCall{call("delegate_task", `{"goal":"1"}`), call("delegate_task", `{"goal":"2"}`), call("delegate_task", `{"goal":"3"}`), call("delegate_task", `{"goal":"4"}`)}, []int{0, 0, 0, 1}},
		{"a delegation and a read do not mix", []PendingCall{call("read_file", `{"path":"a"}`), call("delegate_task", `{"goal":"1"}`)}, []int{0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, SegmentPlan(tc.calls, barrier, 3))
		})
	}
}
