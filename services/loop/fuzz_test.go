package loop

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// FuzzRepairArgs: whatever a model writes as tool arguments, RepairArgs
// never panics and returns either a JSON object text or an *ArgsError with
// a reason. Seeds: testdata/fuzz/FuzzRepairArgs.
func FuzzRepairArgs(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		_, decoded := asObject(raw)
		require.Equal(t, decoded, isObject(raw), "is %q an object", raw)
		out, err := RepairArgs(raw)
		if err != nil {
			var ae *ArgsError
			require.ErrorAs(t, err, &ae)
			require.NotEmpty(t, ae.Reason)
			return
		}
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &obj), "repaired %q to %q", raw, out)
		require.NotNil(t, obj, "repaired %q to a non-object %q", raw, out)
		again, err := RepairArgs(out)
		require.NoError(t, err)
		require.JSONEq(t, out, again, "repair is stable")
	})
}

// FuzzRepairToolName: any name maps to a known tool or to ok=false, a known
// name maps to itself. Seeds: testdata/fuzz/FuzzRepairToolName.
func FuzzRepairToolName(f *testing.F) {
	known := toolspec.Names()
	f.Fuzz(func(t *testing.T, name string) {
		if len(name) > 256 {
			return // model tool names are short; the matcher is quadratic
		}
		got, ok := RepairToolName(name, known)
		if ok {
			require.Contains(t, known, got, "repaired %q to an unknown tool", name)
		}
		for _, k := range known {
			if name == k {
				require.True(t, ok)
				require.Equal(t, k, got)
			}
		}
	})
}

// FuzzLLMResponse decodes herald.llm.response.loop.<sid> payloads as
// handleModelResponse does: garbage is a Permanent error (dead-lettered),
// an accepted response either has a usable session id or is rejected, and
// its message can join a history that RepairHistory accepts.
// Seeds: testdata/fuzz/FuzzLLMResponse.
func FuzzLLMResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		resp := &heraldpb.LLMResponse{}
		if err := bus.Decode(data, resp); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		if !proto.IsToken(resp.SessionId) {
			return // handleModelResponse dead-letters it
		}
		require.True(t, strings.HasPrefix(bus.LLMResponse(bus.OwnerLoop, resp.SessionId), "herald.llm.response.loop."))
		hist := []*heraldpb.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}
		if resp.Message != nil {
			hist = append(hist, resp.Message)
		}
		checkRepaired(t, RepairHistory(hist))
	})
}

// FuzzToolResult decodes herald.tool.result.<sid>.<call> payloads as
// handleToolResult does and checks the result subject is always valid.
// Seeds: testdata/fuzz/FuzzToolResult.
func FuzzToolResult(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		res := &heraldpb.ToolResult{}
		if err := bus.Decode(data, res); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		if !proto.IsToken(res.SessionId) {
			return // handleToolResult dead-letters it
		}
		subj := bus.ToolResult(res.SessionId, res.CallId)
		require.Len(t, strings.Split(subj, "."), 5, "call id %q keeps the result subject one token", res.CallId)
	})
}

// FuzzTranscriptEntry decodes herald.session.<sid>.log entries as the loop
// rebuilds a session, then repairs the history made of them.
// Seeds: testdata/fuzz/FuzzTranscriptEntry.
func FuzzTranscriptEntry(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		e := &heraldpb.TranscriptEntry{}
		if err := bus.Decode(data, e); err != nil {
			require.True(t, bus.IsPermanent(err))
			return
		}
		checkRepaired(t, RepairHistory([]*heraldpb.ChatMessage{{Role: "user", Content: "u"}, e.Message, e.Message}))
	})
}

// checkRepaired asserts what providers require of a repaired history: every
// tool message answers a call of the assistant message before its run of
// tool messages, every call has exactly one answer, and every call's
// arguments are a JSON object.
func checkRepaired(t *testing.T, msgs []*heraldpb.ChatMessage) {
	t.Helper()
	var open map[string]int
	for i, m := range msgs {
		require.NotNil(t, m, "message %d", i)
		if m.Role == "tool" {
			require.NotNil(t, open, "tool message %d follows no assistant call", i)
			_, ok := open[m.ToolCallId]
			require.True(t, ok, "tool message %d answers unknown call %q", i, m.ToolCallId)
			open[m.ToolCallId]++
			continue
		}
		requireAllAnswered(t, open)
		open = nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			open = map[string]int{}
			for _, c := range m.ToolCalls {
				open[c.Id] = 0
				var obj map[string]any
				require.NoError(t, json.Unmarshal([]byte(c.Arguments), &obj), "arguments of call %q", c.Id)
				require.NotNil(t, obj, "arguments of call %q", c.Id)
				require.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, c.Name, "name of call %q", c.Id)
			}
		}
	}
	requireAllAnswered(t, open)
}

func requireAllAnswered(t *testing.T, open map[string]int) {
	t.Helper()
	for id, n := range open {
		require.GreaterOrEqual(t, n, 1, "call %q has no result", id)
	}
}
