package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

func TestLoopEmptyAnswerAfterToolResultsGetsOneNudge(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		switch {
		case r.AssistantCount() == 0:
			return scripted.Tool("read_file", `{"path":"notes.txt"}`)
		case strings.Contains(r.LastMessage().Text(), "You have the tool results above"):
			return scripted.Text("The notes say green tea.")
		}
		return scripted.Reply{}
	})
	require.NoError(t, writeWorkspaceFile(h, "notes.txt", "green tea"))
	task := NewTask("what do the notes say")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "The notes say green tea.", res.FinalResponse)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 3)
	requireWellFormed(t, reqs[2])
	msgs := h.Transcript(task.SessionID)
	require.Equal(t, "system,user,assistant,tool,assistant", roles(msgs))
	requireNoScaffolding(t, msgs, "You have the tool results above")
	require.Equal(t, 3, res.APICalls)
	require.Equal(t, 2, res.Iterations, "a retry is not a new iteration")
}

func TestLoopEmptyAndThinkingOnlyRetryCounts(t *testing.T) {
	cases := []struct {
		name     string
		reply    scripted.Reply
		requests int
	}{
		{"truly empty: 3 retries, no fallback configured", scripted.Reply{}, 4},
		{"thinking only: 2 prefill retries, no fallback configured", scripted.Reply{Reasoning: "let me think about it"}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Start(t, scripted.Conversation(tc.reply))
			task := NewTask("empty case " + tc.name)
			res := h.Run(task)
			require.Equal(t, proto.ExitEmptyResponseExhausted, res.ExitReason)
			reqs := convo(h, task.Prompt)
			require.Len(t, reqs, tc.requests)
			require.Contains(t, res.FinalResponse, "empty")
			for _, r := range reqs[1:] {
				require.Equal(t, "user", r.LastMessage().Role, "each retry carries a nudge")
				requireWellFormed(t, r)
			}
			msgs := h.Transcript(task.SessionID)
			require.Equal(t, "system,user", roles(msgs), "no empty or scaffolding message persisted")
			require.Eventually(t, func() bool {
				return len(h.EventsOfType(task.SessionID, proto.EventRetry)) == tc.requests-1
			}, 5*time.Second, 10*time.Millisecond, "one retry event per retry")
			require.Contains(t, stateNames(t, h, task.SessionID), proto.StateErrorHandling)
		})
	}
}

func TestLoopThinkingOnlyThenAnswerKeepsOnlyTheAnswer(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if strings.Contains(r.LastMessage().Text(), "wrote no answer") {
			return scripted.Text("It is 7.")
		}
		return scripted.Reply{Reasoning: "hmm, 3+4"}
	})
	task := NewTask("ponder")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "It is 7.", res.FinalResponse)
	require.Len(t, convo(h, task.Prompt), 2)
	require.Equal(t, "system,user,assistant", roles(h.Transcript(task.SessionID)))
}

func TestLoopTruncatedAnswersAreContinuedAndJoined(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		switch lastAssistant(r) {
		case "":
			return scripted.Reply{Content: "The first part, ", FinishReason: "length"}
		case "The first part, ":
			return scripted.Reply{Content: "the second part, ", FinishReason: "length"}
		}
		return scripted.Text("and the end.")
	})
	task := NewTask("write a long answer")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "The first part, the second part, and the end.", res.FinalResponse)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 3)
	for _, r := range reqs[1:] {
		require.Contains(t, r.LastMessage().Text(), "cut off")
		requireWellFormed(t, r)
	}
	msgs := h.Transcript(task.SessionID)
	require.Equal(t, "system,user,assistant", roles(msgs))
	require.Equal(t, res.FinalResponse, msgs[2].Content)
	requireNoScaffolding(t, msgs, "cut off")
}

func TestLoopStillTruncatedAfterThreeContinuations(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Reply{Content: "more ", FinishReason: "length"}))
	task := NewTask("never stop writing")
	res := h.Run(task)
	require.Equal(t, proto.ExitTruncated, res.ExitReason)
	require.Equal(t, "more more more more ", res.FinalResponse)
	require.Len(t, convo(h, task.Prompt), 4, "the first call and 3 continuations")
}

func TestLoopEmptyAnswersMoveToTheFallbackProvider(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if r.Model == "backup-model" {
			return scripted.Text("answered by the fallback")
		}
		return scripted.Reply{}
	}, withConfig(func(c *config.Config) {
		c.FallbackProviders = []config.Provider{{Provider: "openai", Model: "backup-model", BaseURL: c.Primary.BaseURL}}
	}))
	task := NewTask("answer me somehow")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "answered by the fallback", res.FinalResponse)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 5, "the first call, 3 retries on the primary, then the fallback")
	for _, r := range reqs[:4] {
		require.Equal(t, "test-model", r.Model)
	}
	require.Equal(t, "backup-model", reqs[4].Model)
	require.Equal(t, "system,user,assistant", roles(h.Transcript(task.SessionID)))
}

func TestLoopEmptyAnswerAfterStreamedTextKeepsTheStreamedText(t *testing.T) {
	// A Responses API stream whose deltas carry the answer while its final
	// response.completed lists no output, as some providers send it.
	h := Start(t, scripted.Conversation(scripted.Reply{Raw: responsesStreamWithoutOutput("The notes ", "say green ", "tea.")}),
		withConfig(func(c *config.Config) { c.Primary.APIMode = "codex_responses" }))
	task := NewTask("what do the notes say")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "The notes say green tea.", res.FinalResponse)
	require.Equal(t, 1, res.APICalls, "an answer the user already saw is not asked for again")
	msgs := h.Transcript(task.SessionID)
	require.Equal(t, "system,user,assistant", roles(msgs))
	require.Equal(t, "The notes say green tea.", msgs[2].Content)
}

func TestLoopStreamBrokenOffKeepsTheTextTheUserSaw(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		// Every attempt breaks off after the role chunk and four 5-character chunks.
		return scripted.Reply{Content: "The answer is forty-two, as the notes show.", ChunkChars: 5, CutAfter: 5}
	})
	task := NewTask("what is the answer")
	res := h.Run(task)
	require.Equal(t, proto.ExitAllRetriesExhausted, res.ExitReason, "the call did fail")
	require.Contains(t, res.Error, "connection")
	require.Equal(t, "The answer is forty-", res.FinalResponse, "the text of the last attempt, once")
	msgs := h.Transcript(task.SessionID)
	require.Equal(t, "system,user,assistant", roles(msgs))
	require.Equal(t, "The answer is forty-", msgs[2].Content)
}

// responsesStreamWithoutOutput is a Responses API event stream that streams
// deltas as text and then completes with an empty output list.
func responsesStreamWithoutOutput(deltas ...string) string {
	var b strings.Builder
	event := func(typ, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data) }
	event("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"test-model","output":[]}}`)
	for i, d := range deltas {
		event("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q}`, i+1, d))
	}
	event("response.completed", fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":{"id":"resp_1","object":"response","status":"completed","model":"test-model","output":[],"usage":{"input_tokens":40,"output_tokens":6,"total_tokens":46}}}`, len(deltas)+1))
	return b.String()
}
