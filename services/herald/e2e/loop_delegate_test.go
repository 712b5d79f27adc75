package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

const parentPrompt = "split the work four ways"

func toolNames(t *testing.T, r *scripted.Request) []string {
	var names []string
	for _, raw := range r.Tools {
		var spec struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		require.NoError(t, json.Unmarshal(raw, &spec))
		names = append(names, spec.Function.Name)
	}
	return names
}

func TestLoopDelegatesToAtMostThreeChildrenAtOnce(t *testing.T) {
	var calls []scripted.Call
	for i := 1; i <= 4; i++ {
		calls = append(calls, scripted.Call{Name: "delegate_task", Args: fmt.Sprintf(`{"goal":"part %d","context":"ctx %d"}`, i, i)})
	}
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if r.FirstUser() == parentPrompt {
			if r.AssistantCount() == 0 {
				return scripted.Reply{ToolCalls: calls}
			}
			return scripted.Text("all four parts done")
		}
		goal := strings.SplitN(r.FirstUser(), "\n", 2)[0]
		return scripted.Reply{Content: goal + " finished", Usage: &scripted.Usage{PromptTokens: 1_000_000, CompletionTokens: 10}}
	})
	task := NewTask(parentPrompt)
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "all four parts done", res.FinalResponse)

	results := toolContents(h.Transcript(task.SessionID))
	require.Len(t, results, 4)
	for i, r := range results {
		require.Equal(t, fmt.Sprintf("part %d finished", i+1), r, "child answers in call order")
	}
	require.Greater(t, res.CostUSD, 4.0, "the children's costs are the parent's")

	order := map[string]int{}
	for i, r := range h.Model.Requests() {
		goal := strings.SplitN(r.FirstUser(), "\n", 2)[0]
		if _, seen := order[goal]; !seen {
			order[goal] = i
		}
		if strings.HasPrefix(goal, "part") {
			require.Contains(t, r.FirstUser(), "ctx", "the child gets the parent's context")
			names := toolNames(t, r)
			require.NotContains(t, names, "delegate_task")
			require.NotContains(t, names, "clarify")
			require.NotContains(t, names, "memory")
			require.Contains(t, names, "read_file")
			require.Contains(t, r.Messages[0].Text(), "subagent")
		}
	}
	for i := 1; i <= 3; i++ {
		require.Less(t, order[fmt.Sprintf("part %d", i)], order["part 4"], "the 4th child waits for a free slot")
	}
}

func TestLoopChildHasItsOwnBudgetAndCannotDelegate(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if r.FirstUser() == "delegate once" {
			if r.AssistantCount() == 0 {
				return scripted.Tool("delegate_task", `{"goal":"dig deep"}`)
			}
			return scripted.Text("the child reported back")
		}
		if len(r.Tools) == 0 {
			return scripted.Text("child summary: ran out of steps")
		}
		if r.AssistantCount() == 0 {
			return scripted.Tool("delegate_task", `{"goal":"grandchild"}`)
		}
		return stepRead(r)
	}, withConfig(func(c *config.Config) { c.Delegation.MaxIterations = 3 }))
	task := NewTask("delegate once")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	results := toolContents(h.Transcript(task.SessionID))
	require.Len(t, results, 1)
	require.Contains(t, results[0], "max_iterations_reached")
	require.Contains(t, results[0], "child summary: ran out of steps")
	child := convo(h, "dig deep")
	require.Len(t, child, 4, "three steps of the child's own budget, then its grace call")
	require.Contains(t, child[1].Messages[len(child[1].Messages)-1].Text(), "no tool named \"delegate_task\"", "depth 1")
	require.Empty(t, convo(h, "grandchild"))
	require.Equal(t, 2+4, res.APICalls, "the child's calls count for the parent")
}
