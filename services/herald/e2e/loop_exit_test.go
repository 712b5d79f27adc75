package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestLoopStateEventsFollowTheStateMachine(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Reply{Content: "Let me look.", ToolCalls: []scripted.Call{{Name: "read_file", Args: `{"path":"a.txt"}`}}},
		scripted.Text("The file is missing."),
	))
	task := NewTask("inspect a.txt")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, []string{proto.StateIdle, proto.StateThinking, proto.StateActing, proto.StateObserving,
		proto.StateThinking, proto.StateDone}, stateNames(t, h, task.SessionID))
	require.Equal(t, 2, res.Iterations)
	require.Equal(t, 2, res.APICalls)
	require.Equal(t, "system,user,assistant,tool,assistant", roles(h.Transcript(task.SessionID)))
	var seqs []int64
	for _, ev := range h.EventsOfType(task.SessionID, proto.EventState) {
		seqs = append(seqs, ev.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		require.Greater(t, seqs[i], seqs[i-1], "event seq increases")
	}
}

func TestLoopReasoningIsKeptApartFromTheAnswer(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Reply{Reasoning: "thinking hard", Content: "42"}))
	task := NewTask("what is the answer")
	res := h.Run(task)
	require.Equal(t, "42", res.FinalResponse)
	msgs := h.Transcript(task.SessionID)
	last := msgs[len(msgs)-1]
	require.Equal(t, "42", last.Content)
	require.Equal(t, "thinking hard", last.Reasoning)
}

func TestLoopMaxIterationsEndsWithAGraceCallWithoutTools(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("Summary: I read f0 and f1; nothing else was done.")
		}
		return stepRead(r)
	})
	task := taskWith("read every file", 2)
	res := h.Run(task)
	require.Equal(t, proto.ExitMaxIterations, res.ExitReason)
	require.Equal(t, "Summary: I read f0 and f1; nothing else was done.", res.FinalResponse)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 3, "two steps and one grace call")
	for _, r := range reqs[:2] {
		require.NotEmpty(t, r.Tools)
	}
	require.NotContains(t, reqs[0].LastMessage().Text(), "Budget warning")
	require.Contains(t, reqs[1].LastMessage().Text(), "Budget warning", "the last step with tools is announced")
	requireWellFormed(t, reqs[1])
	grace := reqs[2]
	require.Empty(t, grace.Tools, "the grace call has tools disabled")
	require.Equal(t, "user", grace.LastMessage().Role)
	require.Contains(t, grace.LastMessage().Text(), "tools are now disabled")
	requireWellFormed(t, grace)
	msgs := h.Transcript(task.SessionID)
	requireNoScaffolding(t, msgs, "tools are now disabled", "Budget warning")
	require.Equal(t, "system,user,assistant,tool,assistant,tool,assistant", roles(msgs))
	require.Equal(t, res.FinalResponse, msgs[len(msgs)-1].Content)
}

func TestLoopCheapStepsRefundTheIterationBudget(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("summary")
		}
		if r.AssistantCount() < 2 {
			return scripted.Tool("todo", `{"todos":[{"id":"`+string(rune('a'+r.AssistantCount()))+`","content":"x","status":"pending"}]}`)
		}
		return stepRead(r)
	})
	task := taskWith("plan then read", 3)
	res := h.Run(task)
	require.Equal(t, proto.ExitMaxIterations, res.ExitReason)
	reqs := convo(h, task.Prompt)
	require.Len(t, reqs, 6, "two refunded todo steps, three read steps, one grace call")
	require.Empty(t, reqs[5].Tools)
	require.Equal(t, 5, res.Iterations)
}

func TestLoopCheapStepsCannotRunForever(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("summary")
		}
		return scripted.Tool("todo", `{"todos":[{"id":"`+string(rune('a'+r.AssistantCount()))+`","content":"x","status":"pending"}]}`)
	})
	task := taskWith("plan forever", 3)
	res := h.Run(task)
	require.Equal(t, proto.ExitMaxIterations, res.ExitReason)
	require.Len(t, convo(h, task.Prompt), 7, "a hard cap of twice the budget, then the grace call")
}

func TestLoopExitReasons(t *testing.T) {
	cases := []struct {
		name   string
		script scripted.Script
		maxIt  int
		opts   []Option
		reason string
		check  func(t *testing.T, h *H, task proto.Task, res proto.Result)
	}{
		{name: "text", script: scripted.Conversation(scripted.Text("done")), reason: proto.ExitTextResponse},
		{name: "server errors", script: scripted.Conversation(scripted.Reply{Status: 500, Body: `{"error":{"message":"boom"}}`}),
			reason: proto.ExitAllRetriesExhausted, check: func(t *testing.T, h *H, task proto.Task, res proto.Result) {
				require.NotEmpty(t, res.Error)
				require.GreaterOrEqual(t, len(convo(h, task.Prompt)), 2, "the gateway retried")
			}},
		{name: "auth", script: scripted.Conversation(scripted.Reply{Status: 401, Body: `{"error":{"message":"bad key"}}`}),
			reason: proto.ExitAuthFailed, check: func(t *testing.T, h *H, task proto.Task, res proto.Result) {
				require.Len(t, convo(h, task.Prompt), 1, "auth errors are not retried")
			}},
		{name: "timeout", script: scripted.Conversation(scripted.Reply{Content: "late", Delay: 5 * time.Second}),
			opts:   []Option{withConfig(func(c *config.Config) { c.Retry.CallTimeout = 150 * time.Millisecond })},
			reason: proto.ExitTimeout},
		{name: "error near the end", maxIt: 2, script: func(r *scripted.Request) scripted.Reply {
			if r.AssistantCount() == 0 {
				return stepRead(r)
			}
			return scripted.Reply{Status: 500, Body: `{"error":{"message":"boom"}}`}
		}, reason: proto.ExitErrorNearMaxIterations},
		{name: "truncated first response", script: scripted.Conversation(scripted.Reply{FinishReason: "length"}),
			reason: proto.ExitTruncated, check: func(t *testing.T, h *H, task proto.Task, res proto.Result) {
				require.Contains(t, res.Error, "cut off")
				require.Equal(t, "system,user", roles(h.Transcript(task.SessionID)))
			}},
		{name: "invalid tool calls", script: scripted.Conversation(scripted.Tool("launch_rockets", `{}`)),
			reason: proto.ExitInvalidToolCalls, check: func(t *testing.T, h *H, task proto.Task, res proto.Result) {
				require.Len(t, convo(h, task.Prompt), 3)
				require.Contains(t, res.Error, "launch_rockets")
			}},
		{name: "repeat", script: scripted.Conversation(scripted.Tool("read_file", `{"path":"same.txt"}`)),
			reason: proto.ExitRepeatDetected},
		{name: "empty", script: scripted.Conversation(scripted.Reply{}), reason: proto.ExitEmptyResponseExhausted,
			check: func(t *testing.T, h *H, task proto.Task, res proto.Result) {
				require.Contains(t, res.FinalResponse, "empty")
			}},
		{name: "money budget", script: scripted.Conversation(
			scripted.Reply{ToolCalls: []scripted.Call{{Name: "read_file", Args: `{"path":"a"}`}}, Usage: &scripted.Usage{PromptTokens: 1_000_000, CompletionTokens: 10}},
			scripted.Text("never")),
			reason: proto.ExitBudgetExhausted, check: func(t *testing.T, h *H, task proto.Task, res proto.Result) {
				require.Len(t, convo(h, task.Prompt), 1, "no call after the money is spent")
				require.InDelta(t, 1.0, res.CostUSD, 0.01)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Start(t, tc.script, tc.opts...)
			task := taskWith("exit case "+tc.name, tc.maxIt)
			if tc.reason == proto.ExitBudgetExhausted {
				task.MaxCostUSD = 0.5
			}
			res := h.Run(task)
			require.Equal(t, tc.reason, res.ExitReason, "result: %+v", res)
			require.Equal(t, task.TaskID, res.TaskID)
			if tc.check != nil {
				tc.check(t, h, task, res)
			}
			names := stateNames(t, h, task.SessionID)
			require.Equal(t, proto.StateDone, names[len(names)-1])
			if tc.reason != proto.ExitTextResponse {
				require.NotEmpty(t, strings.TrimSpace(res.FinalResponse), "every exit explains itself")
			}
		})
	}
}

func TestLoopInterruptStopsAnInFlightModelCallWithinASecond(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Reply{Content: "too late", Delay: 20 * time.Second}))
	task := NewTask("think for a long time")
	h.Submit(task)
	require.Eventually(t, func() bool { return len(convo(h, task.Prompt)) == 1 }, 5*time.Second, 5*time.Millisecond)
	start := time.Now()
	h.interrupt(task.SessionID)
	res := h.WaitResult(task, 5*time.Second)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, proto.ExitInterrupted, res.ExitReason)
	require.Equal(t, "system,user", roles(h.Transcript(task.SessionID)), "nothing partial persisted")
	require.NotContains(t, res.FinalResponse, "too late")
}

func TestLoopInterruptedAnswerDiscardsTheTextStreamedSoFar(t *testing.T) {
	// The same interrupt reaches the loop and the gateway; here the
	// gateway's answer (interrupted, with the text streamed so far) is what
	// ends the turn: the loop is down when the interrupt comes, and the
	// stored interrupt is removed before a loop starts again.
	h := startWithoutLoop(t, scripted.Conversation(scripted.Reply{Content: "Half an answer that never ends.", ChunkChars: 5, StallAfter: 4}))
	first := startLoop(t, h, nil)
	task := NewTask("start answering")
	h.Submit(task)
	require.Eventually(t, func() bool { return len(h.EventsOfType(task.SessionID, proto.EventDelta)) == 3 },
		10*time.Second, 5*time.Millisecond)
	stopLoop(t, first)
	h.interrupt(task.SessionID)
	require.Eventually(t, func() bool {
		m, err := bus.LastOnSubject(context.Background(), h.JS, bus.StreamLLMResponses, bus.LLMResponse(bus.OwnerLoop, task.SessionID))
		resp := &heraldpb.LLMResponse{}
		return err == nil && bus.Decode(m.Data, resp) == nil && resp.ErrorClass == "interrupted" && resp.PartialContent == "Half an answer "
	}, 10*time.Second, 5*time.Millisecond, "the gateway answers interrupted, with what it had streamed")
	control, err := h.JS.Stream(context.Background(), bus.StreamControl)
	require.NoError(t, err)
	require.NoError(t, control.Purge(context.Background(), jetstream.WithPurgeSubject(bus.SessionInterrupt(task.SessionID))))
	startLoop(t, h, nil)

	res := h.WaitResult(task, 10*time.Second)
	require.Equal(t, proto.ExitInterrupted, res.ExitReason)
	require.NotContains(t, res.FinalResponse, "Half an")
	require.Equal(t, "system,user", roles(h.Transcript(task.SessionID)), "nothing partial persisted")
}

func TestLoopInterruptWhileToolsRun(t *testing.T) {
	h := Start(t, scripted.Conversation(
		scripted.Tool("terminal", `{"command":"sleep 3"}`),
		scripted.Text("never"),
	), withConfig(func(c *config.Config) { c.Approvals.Mode = "off" }))
	task := NewTask("sleep a while")
	h.Submit(task)
	require.Eventually(t, func() bool { return len(h.EventsOfType(task.SessionID, proto.EventToolStarted)) > 0 },
		10*time.Second, 5*time.Millisecond)
	start := time.Now()
	h.interrupt(task.SessionID)
	res := h.WaitResult(task, 5*time.Second)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, proto.ExitInterrupted, res.ExitReason)
	require.Len(t, convo(h, task.Prompt), 1)
}
