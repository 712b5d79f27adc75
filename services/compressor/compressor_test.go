package compressor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestPruningLeavesOneLineSummaryPerTool(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, noModelConfig())
	msgs := []*heraldpb.ChatMessage{
		sys("You are Herald."), user("Fix the failing test."),
		calls("c1", "terminal", map[string]any{"command": "go test ./..."}), result("c1", "terminal", terminalOutput(240, 1)),
		calls("c2", "read_file", map[string]any{"path": "pkg/a.go"}), result("c2", "read_file", strings.Repeat("line\n", 500)),
		calls("c3", "write_file", map[string]any{"path": "pkg/a.go", "content": "package a\n\nfunc A() {}\n"}), result("c3", "write_file", "wrote 25 bytes (3 lines) to pkg/a.go"+strings.Repeat(".", 300)),
		calls("c4", "search_files", map[string]any{"pattern": "func A"}), result("c4", "search_files", strings.Repeat("pkg/a.go:3: func A\n", 40)),
		calls("c5", "terminal", map[string]any{"command": "ls"}), result("c5", "terminal", `{"output":"a\n","exit_code":0}`),
	}
	msgs = append(msgs, agentHistory("unused", 12, 50)[2:]...)
	res := request(t, b, &heraldpb.CompressRequest{RequestId: "r1", SessionId: "s1", Messages: msgs,
		ProtectFirstN: 1, ProtectLastN: 20, ContextWindow: 1_000_000})

	out := res.Messages
	require.Len(t, out, len(msgs), "pruning alone fits: no message removed")
	require.Equal(t, "[pruned terminal output: `go test ./...` exited 1, 240 lines of output]", out[3].Content)
	require.Equal(t, `[pruned read_file output: "pkg/a.go", 2500 chars, 500 lines]`, out[5].Content)
	require.Equal(t, `[pruned write_file output: wrote "pkg/a.go", 3 lines]`, out[7].Content)
	require.Equal(t, "[pruned search_files output: 760 chars]", out[9].Content)
	require.Equal(t, `{"output":"a\n","exit_code":0}`, out[11].Content, "short outputs stay as they are")
	require.EqualValues(t, 4, res.PrunedToolOutputs)
	require.Less(t, res.TokensAfter, res.TokensBefore)
	require.Equal(t, contents(msgs[len(msgs)-20:]), contents(out[len(out)-20:]), "the tail is verbatim")
	requireWellFormed(t, out)
}

func TestHeadAndTailKeptVerbatimAndNoToolMessageOrphaned(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, noModelConfig())
	goal := "Make every test in ./pkg pass without changing the public API."
	for _, tc := range []struct{ first, last, steps int }{
		{3, 20, 60}, {1, 5, 61}, {2, 7, 62}, {4, 1, 60}, {3, 2, 61}, {0, 6, 60}, {3, 19, 61},
	} {
		t.Run(fmt.Sprintf("first%d_last%d", tc.first, tc.last), func(t *testing.T) {
			msgs := agentHistory(goal, tc.steps, 4000)
			res := request(t, b, &heraldpb.CompressRequest{RequestId: t.Name(), SessionId: "s1", Messages: msgs,
				ProtectFirstN: int32(tc.first), ProtectLastN: int32(tc.last), ContextWindow: 100_000, Reason: ReasonOverflow})
			out := res.Messages
			requireWellFormed(t, out)
			require.Equal(t, msgs[0].Content, out[0].Content, "system prompt kept")
			require.Equal(t, goal, out[1].Content, "first user goal kept verbatim")
			tail := msgs[len(msgs)-tc.last:]
			require.Equal(t, contents(tail), contents(out[len(out)-len(tail):]), "the last messages are verbatim")
			require.Len(t, summaries(out), 1)
			require.Less(t, res.TokensAfter, res.TokensBefore/2)
		})
	}
}

func TestSummaryNeverTouchesAMessageOfItsRole(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, noModelConfig())
	big := strings.Repeat("words ", 3000)
	cases := map[string][]*heraldpb.ChatMessage{
		"head ends user, tail starts assistant": {sys("s"), user("goal"), asst(big), user(big), asst(big), user("q"), asst("final")},
		"head ends assistant, tail starts user": {sys("s"), user("goal"), asst("ok"), user(big), asst(big), user(big), asst(big), user("last"), asst("done")},
		"head ends tool, tail starts user":      {sys("s"), user("goal"), calls("a", "todo", map[string]any{}), result("a", "todo", "[]"), asst(big), user(big), asst(big), user("last"), asst("done")},
	}
	for name, msgs := range cases {
		t.Run(name, func(t *testing.T) {
			first := 1
			if strings.Contains(name, "head ends assistant") || strings.Contains(name, "head ends tool") {
				first = 2
			}
			res := request(t, b, &heraldpb.CompressRequest{RequestId: strings.ReplaceAll(name, " ", "-"), SessionId: "s2",
				Messages: msgs, ProtectFirstN: int32(first), ProtectLastN: 2, ContextWindow: 8000})
			requireWellFormed(t, res.Messages)
			require.Len(t, summaries(res.Messages), 1)
			require.Equal(t, "goal", res.Messages[1].Content)
		})
	}
}

func TestMalformedRequestIsDeadLetteredAndServiceKeepsWorking(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, noModelConfig())
	ctx := context.Background()
	require.NoError(t, bus.Publish(ctx, b.JS, bus.CompressRequest("s1"), "", []byte("not protobuf \xff\xff")))
	require.NoError(t, bus.PublishProto(ctx, b.JS, bus.CompressRequest("s1"), "", &heraldpb.CompressRequest{SessionId: "s1"}))
	require.Eventually(t, func() bool {
		return len(heraldtest.DeadLetters(t, b.JS, bus.StreamCompress)) == 2
	}, wait, 10*time.Millisecond)
	reasons := ""
	for _, dl := range heraldtest.DeadLetters(t, b.JS, bus.StreamCompress) {
		reasons += dl.Header.Get(bus.HeaderError) + "\n"
	}
	require.Contains(t, reasons, "malformed")
	require.Contains(t, reasons, "request_id is required")

	res := request(t, b, &heraldpb.CompressRequest{RequestId: "ok", SessionId: "s1", Messages: agentHistory("goal", 10, 100)})
	require.NotEmpty(t, res.Messages)
}

func TestParallelCallGroupsStayWholeAtBothBoundaries(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, noModelConfig())
	parallel := func(step int) []*heraldpb.ChatMessage {
		m := &heraldpb.ChatMessage{Role: "assistant", Content: "checking three files"}
		var out []*heraldpb.ChatMessage
		for i := range 3 {
			id := fmt.Sprintf("p%d_%d", step, i)
			m.ToolCalls = append(m.ToolCalls, &heraldpb.ToolCall{Id: id, Name: "read_file", Arguments: fmt.Sprintf(`{"path":"f%d.go"}`, i)})
			out = append(out, result(id, "read_file", strings.Repeat("y", 2000)))
		}
		return append([]*heraldpb.ChatMessage{m}, out...)
	}
	msgs := []*heraldpb.ChatMessage{sys("s"), user("goal")}
	for step := range 30 {
		msgs = append(msgs, parallel(step)...)
	}
	msgs = append(msgs, asst("done"))
	// Every cut lands inside a group of three results: it must move, not split it.
	for _, first := range []int32{2, 3, 4} {
		for _, last := range []int32{2, 3, 5, 6, 7} {
			res := request(t, b, &heraldpb.CompressRequest{RequestId: fmt.Sprintf("p-%d-%d", first, last), SessionId: "p",
				Messages: msgs, ProtectFirstN: first, ProtectLastN: last, ContextWindow: 50_000, Reason: ReasonOverflow})
			requireWellFormed(t, res.Messages)
			require.Len(t, summaries(res.Messages), 1)
			require.Equal(t, contents(msgs[len(msgs)-int(last):]), contents(res.Messages[len(res.Messages)-int(last):]))
		}
	}
}
