package e2e

import (
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
		{"truly empty: 3 retries then the fallback", scripted.Reply{}, 5},
		{"thinking only: 2 prefill retries then the fallback", scripted.Reply{Reasoning: "let me think about it"}, 4},
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
