package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestStreamedAnswerIsPublishedWithUsageCostAndDeltas(t *testing.T) {
	answer := "The capital of France is Paris, a city on the Seine."
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: answer, ChunkChars: 5,
		Usage: &scripted.Usage{PromptTokens: 1000, CompletionTokens: 200, CachedTokens: 400, ReasoningTokens: 50}}),
		func(c *Config) {
			c.Pricing = map[string]config.Price{"m1": {Input: 1, Output: 2, CacheRead: 0.5}}
		})
	ev := r.watch("s1")
	req := r.request("s1", "What is the capital of France?")
	req.Stream = true

	resp := r.call(req)

	require.Empty(t, resp.GetError())
	require.Equal(t, answer, resp.GetMessage().GetContent())
	require.Equal(t, "assistant", resp.GetMessage().GetRole())
	require.Equal(t, "stop", resp.GetFinishReason())
	require.Equal(t, int64(1000), resp.GetPromptTokens())
	require.Equal(t, &heraldpb.Usage{InputTokens: 600, CacheReadTokens: 400, OutputTokens: 200, ReasoningTokens: 50},
		stripUsage(resp.GetUsage()))
	// 600×$1 + 400×$0.5 + 200×$2 per million = $0.0012
	require.InDelta(t, 0.0012, resp.GetCostUsd(), 1e-12)
	require.Equal(t, ModeChatCompletions, resp.GetApiMode())
	require.Equal(t, "m1", resp.GetModel())
	require.Equal(t, int32(1), resp.GetAttempts())

	usage := r.usageEvents()
	require.Len(t, usage, 1)
	u := usage[0]
	require.Equal(t, req.GetRequestId()+":1", u.GetEventId())
	require.Equal(t, uint64(1_200_000), u.GetCostNanoUsd())
	require.Equal(t, PriceConfig, u.GetPriceSource())
	require.Equal(t, StatusOK, u.GetStatus())
	require.Equal(t, "t1", u.GetTenant())
	require.Equal(t, "s1", u.GetSessionId())
	require.Equal(t, "task-s1", u.GetTaskId())
	require.Equal(t, "agent", u.GetPurpose())
	require.Equal(t, int64(600), u.GetUsage().GetInputTokens())

	require.Eventually(t, func() bool { return ev.text() == answer }, 5*time.Second, 5*time.Millisecond)
	deltas := ev.ofType(proto.EventDelta)
	require.Greater(t, len(deltas), 5, "the answer streams in many deltas")
	for i, d := range deltas {
		require.Equal(t, int64(i), d.Seq)
		require.Equal(t, "task-s1", d.TaskID)
		require.Equal(t, int(req.GetStep()), d.Step)
	}
}

func stripUsage(u *heraldpb.Usage) *heraldpb.Usage {
	return &heraldpb.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
		CacheReadTokens: u.GetCacheReadTokens(), CacheWriteTokens: u.GetCacheWriteTokens(), ReasoningTokens: u.GetReasoningTokens()}
}

func TestToolCallsAndReasoningConvertBothWays(t *testing.T) {
	r := newRig(t, scripted.Conversation(
		scripted.Reply{Reasoning: "I should read the file.", ToolCalls: []scripted.Call{{ID: "c2", Name: "read_file", Args: `{"path":"a.txt"}`}}},
	))
	req := r.request("s2", "Read a.txt")
	req.Messages = append(req.Messages,
		&heraldpb.ChatMessage{Role: "assistant", Content: "", Reasoning: "first thought",
			ToolCalls: []*heraldpb.ToolCall{{Id: "c1", Name: "terminal", Arguments: `{"command":"ls"}`}}},
		&heraldpb.ChatMessage{Role: "tool", ToolCallId: "c1", Name: "terminal", Content: "a.txt"},
	)
	req.Tools = []*heraldpb.ToolSpec{{Name: "read_file", Description: "Read a file", ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`}}

	resp := r.call(req)

	require.Empty(t, resp.GetError())
	require.Equal(t, "tool_calls", resp.GetFinishReason())
	require.Equal(t, "I should read the file.", resp.GetMessage().GetReasoning())
	require.Len(t, resp.GetMessage().GetToolCalls(), 1)
	tc := resp.GetMessage().GetToolCalls()[0]
	require.Equal(t, "c2", tc.GetId())
	require.Equal(t, "read_file", tc.GetName())
	require.JSONEq(t, `{"path":"a.txt"}`, tc.GetArguments())

	got := r.model.Requests()[0]
	require.Equal(t, "m1", got.Model)
	require.Len(t, got.Messages, 4)
	require.Equal(t, "terminal", got.Messages[2].ToolCalls[0].Function.Name)
	require.Equal(t, "c1", got.Messages[2].ToolCalls[0].ID)
	require.Equal(t, "first thought", got.Messages[2].Reasoning)
	require.Equal(t, "c1", got.Messages[3].ToolCallID)
	require.Equal(t, "a.txt", got.Messages[3].Text())
	require.Len(t, got.Tools, 1)
	require.Contains(t, string(got.Tools[0]), `"read_file"`)
}

func TestMalformedRequestIsDeadLetteredAndTheNextIsAnswered(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("still here")))
	ctx := context.Background()
	require.NoError(t, bus.Publish(ctx, r.bus.JS, bus.LLMRequest("s3"), "bad-1", []byte{0xff, 0x01, 0x02, 0x03}))
	empty := &heraldpb.LLMRequest{RequestId: "s3:no-messages", SessionId: "s3", ReplySubject: bus.LLMResponse(bus.OwnerLoop, "s3")}
	r.publish(empty)
	nowhere := r.request("s3", "where does this go?")
	nowhere.ReplySubject = "somewhere.else"
	r.publish(nowhere)

	resp := r.call(r.request("s3", "hello"))
	require.Equal(t, "still here", resp.GetMessage().GetContent())

	require.Eventually(t, func() bool {
		return len(heraldtest.DeadLetters(t, r.bus.JS, bus.StreamLLMRequests)) == 3
	}, 5*time.Second, 10*time.Millisecond)
	reasons := ""
	for _, dl := range heraldtest.DeadLetters(t, r.bus.JS, bus.StreamLLMRequests) {
		reasons += dl.Header.Get(bus.HeaderError) + "\n"
	}
	require.Contains(t, reasons, "malformed")
	require.Contains(t, reasons, "has no messages")
	require.Contains(t, reasons, `reply_subject "somewhere.else"`)
	require.Equal(t, 1, r.model.Calls(), "no bad request reached the model")
}

func TestRedeliveredRequestIsNotSentToTheModelTwice(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("fresh")))
	ctx := context.Background()
	answered := r.request("s4", "hello")
	unanswered := r.request("s4b", "hello")
	r.publish(answered)
	r.publish(unanswered)

	// A gateway takes both requests, stores the answer of the first and dies
	// before acknowledging either: both come back to the next gateway.
	die := r.takeAndDie(2)
	earlier := &heraldpb.LLMResponse{RequestId: answered.GetRequestId(), SessionId: "s4",
		Message: &heraldpb.ChatMessage{Role: "assistant", Content: "from before the crash"}}
	require.NoError(t, bus.PublishProto(ctx, r.bus.JS, answered.GetReplySubject(), answered.GetRequestId(), earlier))
	die()

	r.start()
	require.Equal(t, "fresh", r.awaitResponse(unanswered, 10*time.Second).GetMessage().GetContent())
	require.Eventually(t, func() bool {
		n, err := bus.PendingWork(ctx, r.bus.JS, bus.StreamLLMRequests)
		return err == nil && n == 0
	}, 5*time.Second, 5*time.Millisecond, "both redelivered requests are acknowledged")
	require.Equal(t, 1, r.model.Calls(), "only the unanswered request reached the model")
	require.Equal(t, "from before the crash", r.awaitResponse(answered, time.Second).GetMessage().GetContent())
	usage := r.usageEvents()
	require.Len(t, usage, 1, "billed once")
	require.Equal(t, unanswered.GetRequestId()+":d2:1", usage[0].GetEventId(), "a retried run is billed apart from the first")
}

func TestARedeliveredRequestStoresTheUsageItsStoredAnswerCarries(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("never asked")))
	req := r.request("s4c", "hello")
	r.publish(req)

	// The gateway before stored the answer and died before its usage event
	// was stored, and before acknowledging the request.
	die := r.takeAndDie(1)
	billed := r.storeAnswerWithUsage(req, 1_234)
	die()
	require.Empty(t, r.usageEvents())

	r.start()
	r.requestsDrained("the redelivered request is acknowledged")
	usage := r.usageEvents()
	require.Len(t, usage, 1, "the answer's usage is stored, once")
	require.Equal(t, billed.GetEventId(), usage[0].GetEventId())
	require.Equal(t, uint64(1_234), usage[0].GetCostNanoUsd())
	require.Zero(t, r.model.Calls(), "the answered request did not reach the model again")
}

// The session moved on before the request came back: its next request's
// answer is the reply subject's last message. The request's own answer is
// still found, by its request id, among those stored since it was sent.
func TestARedeliveredRequestFindsItsAnswerAfterTheSessionMovedOn(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("never asked")))
	ctx := context.Background()
	req := r.request("s4e", "hello")
	r.publish(req)
	die := r.takeAndDie(1)
	billed := r.storeAnswerWithUsage(req, 777)
	// other sessions' answers, and then this session's next one
	for i := range 5 {
		other := r.request(fmt.Sprintf("s4e-other-%d", i), "hi")
		require.NoError(t, bus.PublishProto(ctx, r.bus.JS, other.GetReplySubject(), other.GetRequestId(),
			&heraldpb.LLMResponse{RequestId: other.GetRequestId(), SessionId: other.GetSessionId()}))
	}
	next := r.request("s4e", "and then?")
	require.NoError(t, bus.PublishProto(ctx, r.bus.JS, next.GetReplySubject(), next.GetRequestId(),
		&heraldpb.LLMResponse{RequestId: next.GetRequestId(), SessionId: "s4e",
			Message: &heraldpb.ChatMessage{Role: "assistant", Content: "the next answer"}}))
	die()

	r.start()
	r.requestsDrained("the redelivered request is acknowledged")
	usage := r.usageEvents()
	require.Len(t, usage, 1, "the answer's usage is stored, once")
	require.Equal(t, billed.GetEventId(), usage[0].GetEventId())
	require.Zero(t, r.model.Calls(), "the answered request did not reach the model again")
}

func TestUsageThatCannotBeStoredComesBackWithItsRequest(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("hi")))
	ctx := context.Background()
	usage, err := r.bus.JS.Stream(ctx, bus.StreamUsage)
	require.NoError(t, err)
	info, err := usage.Info(ctx)
	require.NoError(t, err)
	working := info.Config
	broken := working
	broken.Subjects = []string{"herald.usage-nowhere.>"}
	_, err = r.bus.JS.UpdateStream(ctx, broken)
	require.NoError(t, err)

	req := r.request("s4d", "hello")
	resp := r.call(req)
	require.Equal(t, "hi", resp.GetMessage().GetContent(), "the answer is stored without waiting for its usage")
	require.Len(t, resp.GetUsageEvents(), 1, "and carries it")
	pending, err := bus.PendingWork(ctx, r.bus.JS, bus.StreamLLMRequests)
	require.NoError(t, err)
	require.Equal(t, uint64(1), pending, "the request stays unacknowledged while its usage is not stored")

	_, err = r.bus.JS.UpdateStream(ctx, working)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := bus.PendingWork(ctx, r.bus.JS, bus.StreamLLMRequests)
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond, "the request comes back and is acknowledged once its usage is stored")
	stored := r.usageEvents()
	require.Len(t, stored, 1)
	require.Equal(t, resp.GetUsageEvents()[0].GetEventId(), stored[0].GetEventId())
	require.Equal(t, 1, r.model.Calls(), "the answer was not asked for again")
}

func TestUnknownModelPriceCostsNothingAndSaysSo(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("hi")))
	resp := r.call(r.request("s5", "hello"))
	require.Zero(t, resp.GetCostUsd())
	u := r.usageEvents()
	require.Len(t, u, 1)
	require.Equal(t, PriceUnknown, u[0].GetPriceSource())
	require.Zero(t, u[0].GetCostNanoUsd())
	require.Positive(t, u[0].GetUsage().GetInputTokens())
}

func TestInterruptCancelsTheCallInFlight(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "too late", Delay: 30 * time.Second}))
	req := r.request("s6", "think hard")
	req.Stream = true
	r.publish(req)
	require.Eventually(t, func() bool { return r.model.Calls() == 1 }, 5*time.Second, time.Millisecond)

	sent := time.Now()
	require.NoError(t, r.bus.NC.Publish(bus.SessionInterrupt("s6"), []byte(`{"reason":"user pressed ctrl-c"}`)))
	resp := r.awaitResponse(req, 5*time.Second)

	require.Less(t, time.Since(sent), time.Second)
	require.Equal(t, string(ClassInterrupted), resp.GetErrorClass())
	require.Contains(t, resp.GetError(), "interrupted")
	u := r.usageEvents()
	require.Len(t, u, 1)
	require.Equal(t, StatusError, u[0].GetStatus())
	require.Equal(t, string(ClassInterrupted), u[0].GetErrorClass())
}

func TestInterruptOfAnotherSessionLeavesTheCallAlone(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Reply{Content: "done", Delay: 200 * time.Millisecond}))
	req := r.request("s7", "work")
	r.publish(req)
	require.Eventually(t, func() bool { return r.model.Calls() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, r.bus.NC.Publish(bus.SessionInterrupt("other"), nil))
	resp := r.awaitResponse(req, 5*time.Second)
	require.Empty(t, resp.GetErrorClass())
	require.Equal(t, "done", resp.GetMessage().GetContent())
}
