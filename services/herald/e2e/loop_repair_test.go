package e2e

import (
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

func TestLoopRepairsToolNames(t *testing.T) {
	for _, name := range []string{"READ_FILE", "read-file", "ReadFile", "read_file_tool", "read_fil"} {
		t.Run(name, func(t *testing.T) {
			h := Start(t, scripted.Conversation(scripted.Tool(name, `{"path":"notes.txt"}`), scripted.Text("read it")))
			require.NoError(t, writeWorkspaceFile(h, "notes.txt", "green tea"))
			task := NewTask("read notes via " + name)
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			results := toolContents(h.Transcript(task.SessionID))
			require.Len(t, results, 1)
			require.Contains(t, results[0], "green tea", "the repaired call ran")
		})
	}
}

func TestLoopUnknownToolListsTheAvailableOnesAndThreeStrikesEndTheTurn(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("launch_rockets", `{}`),
		scripted.Text("I cannot launch rockets."),
	))
	task := NewTask("launch the rockets once")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	results := toolContents(h.Transcript(task.SessionID))
	require.Len(t, results, 1)
	require.Contains(t, results[0], `no tool named "launch_rockets"`)
	require.Contains(t, results[0], "read_file")
	require.Contains(t, results[0], "terminal")

	// A valid call between invalid ones resets the count.
	h2 := Start(t, scripted.Conversation(
		scripted.Tool("launch_rockets", `{}`),
		scripted.Tool("launch_rockets", `{}`),
		scripted.Tool("read_file", `{"path":"x"}`),
		scripted.Tool("launch_rockets", `{}`),
		scripted.Tool("launch_rockets", `{}`),
		scripted.Text("gave up"),
	))
	task2 := NewTask("launch rockets with a pause")
	res2 := h2.Run(task2)
	require.Equal(t, proto.ExitTextResponse, res2.ExitReason)
	require.Len(t, convo(h2, task2.Prompt), 6)
}

func TestLoopToolArguments(t *testing.T) {
	cases := []struct {
		name, args string
		ran        bool
		errHas     string
	}{
		{"empty becomes {}", ``, false, "path"},
		{"trailing comma", `{"path":"notes.txt",}`, true, ""},
		{"unclosed", `{"path":"notes.txt"`, true, ""},
		{"not an object", `["notes.txt"]`, false, "must be a JSON object"},
		{"garbage", `path=notes.txt`, false, "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Start(t, scripted.Conversation(scripted.Tool("read_file", tc.args), scripted.Text("ok")))
			require.NoError(t, writeWorkspaceFile(h, "notes.txt", "green tea"))
			task := NewTask("args case " + tc.name)
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			results := toolContents(h.Transcript(task.SessionID))
			require.Len(t, results, 1)
			if tc.ran {
				require.Contains(t, results[0], "green tea")
				return
			}
			require.NotContains(t, results[0], "green tea")
			require.Contains(t, results[0], tc.errHas)
			if tc.errHas != "path" {
				require.Contains(t, results[0], `"properties"`, "the expected schema is named")
			}
		})
	}
}

func TestLoopNeverRunsToolCallsCutOffByTheLengthLimit(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Reply{Content: "I will write the file", FinishReason: "length",
			ToolCalls: []scripted.Call{{Name: "write_file", Args: `{"path":"out.txt","content":"hal`}}},
		scripted.Text(" now, but differently."),
	))
	task := NewTask("write out.txt")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "I will write the file now, but differently.", res.FinalResponse)
	_, err := readWorkspaceFile(h, "out.txt")
	require.Error(t, err, "the cut-off write never ran")
	for _, m := range h.Transcript(task.SessionID) {
		require.Empty(t, m.ToolCalls)
	}
}

func TestLoopRepeatDetection(t *testing.T) {
	for _, threshold := range []int{3, 4} {
		t.Run(strings.Repeat("x", threshold), func(t *testing.T) {
			h := Start(t, func(r *scripted.Request) scripted.Reply {
				if r.AssistantCount() == 0 {
					return scripted.Reply{Content: "Checking the notes.", ToolCalls: []scripted.Call{{Name: "read_file", Args: `{"path":"notes.txt"}`}}}
				}
				return scripted.Tool("read_file", `{ "path": "notes.txt" }`)
			}, withConfig(func(c *config.Config) { c.Agent.RepeatThreshold = threshold }))
			require.NoError(t, writeWorkspaceFile(h, "notes.txt", "green tea"))
			task := NewTask("keep reading notes")
			res := h.Run(task)
			require.Equal(t, proto.ExitRepeatDetected, res.ExitReason)
			require.Contains(t, res.FinalResponse, "Checking the notes.", "what was found so far")
			reqs := convo(h, task.Prompt)
			require.Len(t, reqs, threshold, "the turn ends after the threshold-th identical round")
			for i, r := range reqs {
				nudged := strings.Contains(r.LastMessage().Text(), "same tool call with the same result")
				require.Equal(t, i == threshold-1, nudged, "the nudge comes after round %d only (request %d)", threshold-1, i)
			}
			requireNoScaffolding(t, h.Transcript(task.SessionID), "same tool call with the same result")
		})
	}
}

func TestLoopSameCallWithChangingResultIsNotARepeat(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if r.AssistantCount() >= 4 {
			return scripted.Text("the clock moved")
		}
		return scripted.Tool("terminal", `{"command":"date +%s%N"}`)
	}, withConfig(func(c *config.Config) { c.Approvals.Mode = "off" }))
	task := NewTask("watch the clock")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
}
