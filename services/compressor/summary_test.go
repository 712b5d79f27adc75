package compressor

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

const modelSummary = `## Goal
Make the pkg tests pass.
## Constraints
Keep the public API.
## Completed actions
Ran go test; fixed pkg/file1.go. The deploy key was sk-live-abcdefghijklmnopqrstuvwx.
## Current state
Two tests still fail.
## Open questions
None.
## Relevant files
pkg/file1.go
## Remaining work
Fix the last two tests.`

func modelConfig() Config {
	cfg := DefaultConfig()
	cfg.SummaryTimeout = 5 * time.Second
	return cfg
}

func TestMiddleBecomesAModelSummaryThroughTheGateway(t *testing.T) {
	b := heraldtest.StartBus(t)
	hop := startModelHop(t, b, func(*scripted.Request) scripted.Reply { return scripted.Text(modelSummary) })
	startService(t, b, modelConfig())
	goal := "Make the pkg tests pass; keep the public API."
	msgs := agentHistory(goal, 60, 3000)
	msgs[20].Content = "the flaky test is TestRetryBackoff"
	res := request(t, b, &heraldpb.CompressRequest{RequestId: "sess1:7:compress", SessionId: "sess1", TaskId: "task1",
		Tenant: "acme", Model: "gpt-4o", Messages: msgs, ContextWindow: 60_000, Reason: ReasonOverflow, ApiKeyId: "key_a", ScheduleId: "sch_b"})

	reqs := hop.Requests()
	require.Len(t, reqs, 1)
	llm := reqs[0]
	require.Equal(t, PurposeCompression, llm.Purpose)
	require.Equal(t, "sess1:7:compress:summary", llm.RequestId)
	require.Equal(t, bus.LLMResponse(bus.OwnerCompressor, "sess1"), llm.ReplySubject)
	require.Equal(t, "acme", llm.Tenant)
	require.Equal(t, "key_a", llm.ApiKeyId, "the summary is charged to the session's key and schedule budgets too")
	require.Equal(t, "sch_b", llm.ScheduleId)
	require.Equal(t, "task1", llm.TaskId)
	require.Empty(t, llm.Tools, "a summary call offers no tools")
	prompt := llm.Messages[len(llm.Messages)-1].Content
	for _, section := range summarySections {
		require.Contains(t, prompt, "## "+section)
	}
	require.Contains(t, prompt, "the flaky test is TestRetryBackoff", "the middle is what gets summarized")
	require.Len(t, hop.Model.Requests(), 1, "the model server was asked once")

	out := res.Messages
	requireWellFormed(t, out)
	sums := summaries(out)
	require.Len(t, sums, 1)
	require.Contains(t, sums[0].Content, "reference only")
	require.Contains(t, sums[0].Content, "Two tests still fail.")
	require.NotContains(t, sums[0].Content, "sk-live-abcdefghijklmnopqrstuvwx", "secrets are redacted")
	require.Contains(t, sums[0].Content, "[REDACTED]")
	require.Equal(t, goal, out[1].Content)
	require.Equal(t, contents(msgs[len(msgs)-20:]), contents(out[len(out)-20:]))
	require.Less(t, res.TokensAfter, res.TokensBefore/3)
}

func TestLaterCompressionUpdatesThePreviousSummary(t *testing.T) {
	b := heraldtest.StartBus(t)
	n := 0
	hop := startModelHop(t, b, func(*scripted.Request) scripted.Reply {
		n++
		return scripted.Text(fmt.Sprintf("## Goal\ng\n## Completed actions\nround %d\n", n))
	})
	startService(t, b, modelConfig())
	msgs := agentHistory("the goal", 40, 3000)
	first := request(t, b, &heraldpb.CompressRequest{RequestId: "c1", SessionId: "s1", Messages: msgs, ContextWindow: 60_000, Reason: ReasonOverflow})

	grown := append(append([]*heraldpb.ChatMessage(nil), first.Messages...), agentHistory("", 40, 3000)[2:]...)
	grown = append(grown[:len(first.Messages)], append([]*heraldpb.ChatMessage{user("next part please")}, grown[len(first.Messages):]...)...)
	second := request(t, b, &heraldpb.CompressRequest{RequestId: "c2", SessionId: "s1", Messages: grown, ContextWindow: 60_000, Reason: ReasonOverflow})

	reqs := hop.Requests()
	require.Len(t, reqs, 2)
	prompt := reqs[1].Messages[1].Content
	require.Contains(t, prompt, "<previous-summary>")
	require.Contains(t, prompt, "round 1", "the earlier summary is handed over for updating")
	requireWellFormed(t, second.Messages)
	sums := summaries(second.Messages)
	require.Len(t, sums, 1, "one summary, updated, never two")
	require.Contains(t, sums[0].Content, "round 2")
	require.Equal(t, "the goal", second.Messages[1].Content)
}

func TestFailedSummaryFallsBackAndKeepsTheTail(t *testing.T) {
	b := heraldtest.StartBus(t)
	startModelHop(t, b, func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Status: http.StatusInternalServerError, Body: `{"error":{"message":"boom"}}`}
	})
	startService(t, b, modelConfig())
	msgs := agentHistory("ship the release", 50, 3000)
	res := request(t, b, &heraldpb.CompressRequest{RequestId: "r1", SessionId: "s1", Messages: msgs, ContextWindow: 60_000, Reason: ReasonOverflow})

	requireWellFormed(t, res.Messages)
	sums := summaries(res.Messages)
	require.Len(t, sums, 1)
	for _, section := range summarySections {
		require.Contains(t, sums[0].Content, "## "+section)
	}
	require.Contains(t, sums[0].Content, "terminal `go test ./pkg3`", "the deterministic summary lists what was run")
	require.Contains(t, sums[0].Content, "pkg/file4.go")
	require.Equal(t, contents(msgs[len(msgs)-20:]), contents(res.Messages[len(res.Messages)-20:]))
}

func TestSummaryTimeoutFallsBack(t *testing.T) {
	b := heraldtest.StartBus(t)
	cfg := DefaultConfig()
	cfg.SummaryTimeout = 300 * time.Millisecond // no gateway answers
	startService(t, b, cfg)
	msgs := agentHistory("ship the release", 50, 3000)
	start := time.Now()
	res := request(t, b, &heraldpb.CompressRequest{RequestId: "r1", SessionId: "s1", Messages: msgs, ContextWindow: 60_000, Reason: ReasonOverflow})
	require.Less(t, time.Since(start), 5*time.Second)
	requireWellFormed(t, res.Messages)
	require.Len(t, summaries(res.Messages), 1)
	require.Equal(t, contents(msgs[len(msgs)-20:]), contents(res.Messages[len(res.Messages)-20:]))
}

func TestSecretsNeverSurviveIntoASummary(t *testing.T) {
	for _, secret := range []string{
		"sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"AKIAIOSFODNN7EXAMPLE", "Bearer eyJhbGciOiJIUzI1NiJ9.abc.def",
	} {
		require.NotContains(t, wrapSummary("key: "+secret), secret)
	}
	got := wrapSummary("export DB_PASSWORD=hunter2hunter2 and postgres://app:s3cretpw@db/app")
	require.NotContains(t, got, "hunter2hunter2")
	require.NotContains(t, got, "s3cretpw")
	require.Contains(t, got, "DB_PASSWORD=[REDACTED]")
}

func TestLongSessionAlwaysFitsTheWindow(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, noModelConfig())
	const window = 12_000
	goal := "Refactor the billing module, step by step, keeping tests green."
	history := []*heraldpb.ChatMessage{sys("You are Herald."), user(goal)}
	compressions := 0
	for step := range 200 {
		id := fmt.Sprintf("call_%d", step)
		history = append(history, calls(id, "terminal", map[string]any{"command": fmt.Sprintf("make step%d", step)}),
			result(id, "terminal", terminalOutput(60+step%40, step%3)))
		if estimateTokens(history) <= window/2 {
			continue
		}
		res := request(t, b, &heraldpb.CompressRequest{RequestId: fmt.Sprintf("c%d", step), SessionId: "long",
			Messages: history, ContextWindow: window, Reason: "preflight"})
		compressions++
		requireWellFormed(t, res.Messages)
		require.Less(t, estimateTokens(res.Messages), int64(window/2), "step %d", step)
		require.Equal(t, goal, res.Messages[1].Content, "step %d", step)
		require.Equal(t, contents(history[len(history)-2:]), contents(res.Messages[len(res.Messages)-2:]))
		require.LessOrEqual(t, len(summaries(res.Messages)), 1)
		history = res.Messages
	}
	require.Greater(t, compressions, 3)
	require.True(t, strings.HasPrefix(history[0].Content, "You are Herald."))
}

// TestSummaryCallSpendIsInTheResult: the result carries what the summary
// call reported (usage, cost, attempts), so the loop can count it in the
// turn; a compression that asked no model carries nothing.
func TestSummaryCallSpendIsInTheResult(t *testing.T) {
	b := heraldtest.StartBus(t)
	startModelHop(t, b, func(*scripted.Request) scripted.Reply {
		return scripted.Reply{Content: modelSummary, Usage: &scripted.Usage{PromptTokens: 4321, CompletionTokens: 123}}
	})
	startService(t, b, modelConfig())
	res := request(t, b, &heraldpb.CompressRequest{RequestId: "sp1", SessionId: "s1", Messages: agentHistory("g", 60, 3000),
		ContextWindow: 60_000, Reason: ReasonOverflow})
	require.Len(t, summaries(res.Messages), 1)
	require.Equal(t, int64(4321), res.GetSummaryUsage().GetInputTokens())
	require.Equal(t, int64(123), res.GetSummaryUsage().GetOutputTokens())
	require.InDelta(t, (4321*1+123*2)/1e6, res.SummaryCostUsd, 1e-12)
	require.Equal(t, int32(1), res.SummaryApiCalls)

	pruneOnly := request(t, b, &heraldpb.CompressRequest{RequestId: "sp2", SessionId: "s2", Messages: agentHistory("g", 60, 3000),
		ContextWindow: 1_000_000})
	require.Nil(t, pruneOnly.SummaryUsage, "no summary call, nothing spent")
	require.Zero(t, pruneOnly.SummaryCostUsd)
	require.Zero(t, pruneOnly.SummaryApiCalls)
}

func TestASummaryHoldsNoRunOfAConfiguredKey(t *testing.T) {
	// The key without its prefix (as a provider's error echoes it) matches
	// none of the shapes of secrets; the configured key is known all the same.
	const key = "sk-proj-T0pS3cr3tK3yW1thNoPr3f1xAtAll"
	var c config.Config
	c.Primary.APIKey = key
	cfg := ConfigFrom(c)
	cfg.LLMSummary = false
	b := heraldtest.StartBus(t)
	startService(t, b, cfg)
	msgs := agentHistory("find out why the provider said "+key[9:33]+" is wrong", 50, 3000)
	res := request(t, b, &heraldpb.CompressRequest{RequestId: "r1", SessionId: "s1", Messages: msgs, ContextWindow: 60_000, Reason: ReasonOverflow})
	sums := summaries(res.Messages)
	require.Len(t, sums, 1)
	require.Contains(t, sums[0].Content, "find out why the provider said [REDACTED]", "the goal is in the summary, the key is not")
	for i := 0; i+12 <= len(key); i++ {
		require.NotContains(t, sums[0].Content, key[i:i+12])
	}
}
