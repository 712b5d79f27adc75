package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

// Payloads every subject is sent.
var (
	// malformedBytes is neither JSON nor a protobuf message.
	malformedBytes = []byte("\xff\xfe not a message \x00\x01")
	// jsonTask is JSON where protobuf is expected.
	jsonTask = []byte(`{"prompt":"wrong subject","session_id":"s1"}`)
	// futureProto holds only fields this version does not know (99 and
	// 100): a message from a newer, incompatible sender.
	futureProto = []byte{0x9a, 0x06, 0x02, 'v', '2', 0xa0, 0x06, 0x07}
)

func mustProto(t *testing.T, m gproto.Message) []byte {
	t.Helper()
	b, err := gproto.Marshal(m)
	require.NoError(t, err)
	return b
}

// protoSubject is one internal subject and the consumer that reads it.
type protoSubject struct {
	name     string
	subject  func(sid string) string
	stream   string
	consumer string
	// malformed names the type in the reason of a payload that does not parse.
	malformed string
	// future is in the reason of a message with none of the fields it needs.
	future string
	// claimed, when set, replaces malformed for a claim-checked payload.
	claimed string
	// ghost, when set, is a well-formed message for a session that does not
	// exist: acknowledged without effect.
	ghost func(sid string) gproto.Message
}

var protoSubjects = []protoSubject{
	{name: "llm request", subject: bus.LLMRequest, stream: bus.StreamLLMRequests, consumer: "gateway",
		malformed: "malformed *heraldpb.LLMRequest", future: "LLM request without request_id"},
	{name: "llm response", subject: func(sid string) string { return bus.LLMResponse(bus.OwnerLoop, sid) },
		stream: bus.StreamLLMResponses, consumer: "loop-llm",
		malformed: "malformed *heraldpb.LLMResponse", future: "response has no valid session_id",
		ghost: func(sid string) gproto.Message {
			return &heraldpb.LLMResponse{RequestId: "ghost-request", SessionId: sid, Message: &heraldpb.ChatMessage{Role: "assistant", Content: "boo"}}
		}},
	{name: "tool call", subject: func(sid string) string { return bus.ToolCall(bus.DefaultPool, sid) },
		stream: bus.StreamToolCalls, consumer: "toolrunner-default",
		malformed: "malformed *heraldpb.ToolCallRequest", future: `session_id "" is missing`},
	{name: "memory call", subject: bus.MemoryCall, stream: bus.StreamToolCalls, consumer: "memory",
		malformed: "malformed *heraldpb.ToolCallRequest", future: "tool call needs call_id and session_id"},
	{name: "tool result", subject: func(sid string) string { return bus.ToolResult(sid, "call-1") },
		stream: bus.StreamToolResults, consumer: "loop-tools",
		// A result for a session with no state is taken to be early (its
		// call's commit not yet visible) and redelivered up to MaxDeliver;
		// a stale result for a finished session is acknowledged: see the end
		// of TestBadInputOnEverySubject.
		malformed: "malformed *heraldpb.ToolResult", future: "tool result has no valid session_id"},
	{name: "compress request", subject: bus.CompressRequest, stream: bus.StreamCompress, consumer: "compressor",
		malformed: "malformed *heraldpb.CompressRequest", future: "request_id is required"},
	{name: "compress result", subject: bus.CompressResult, stream: bus.StreamCompressResults, consumer: "loop-compress",
		malformed: "malformed *heraldpb.CompressResult", future: "compression result has no valid session_id",
		ghost: func(sid string) gproto.Message {
			return &heraldpb.CompressResult{RequestId: "ghost-request", SessionId: sid, Messages: []*heraldpb.ChatMessage{{Role: "user", Content: "boo"}}}
		}},
	{name: "usage", subject: bus.UsageSubject, stream: bus.StreamUsage, consumer: "accounting-usage",
		malformed: "malformed *heraldpb.UsageEvent", future: "event has no event_id"},
	{name: "tool events", subject: bus.ToolEventSubject, stream: bus.StreamToolEvents, consumer: "accounting-tools",
		malformed: "malformed *heraldpb.ToolEvent", future: "event has no event_id"},
}

// deadLetter is what a bad message is expected to become.
type deadLetter struct {
	stream, subject string
	data            []byte // nil: a claim-checked payload (matched by its claim header)
	reason          string
}

// acked is a message expected to be acknowledged without a dead letter.
type acked struct {
	stream, consumer, subject string
	seq                       uint64
}

// badInputScript answers "after bad input" with a file write, a memory
// write and an answer (touching the tool runner, memory, gateway and
// accounting); any other conversation gets one answer.
func badInputScript(r *scripted.Request) scripted.Reply {
	if r.FirstUser() != "after bad input" {
		return scripted.Text("ok")
	}
	switch r.AssistantCount() {
	case 0:
		return scripted.Tool("write_file", `{"path":"after.txt","content":"still working"}`)
	case 1:
		return scripted.Tool("memory", `{"action":"add","target":"memory","content":"bad input did not stop Herald"}`)
	}
	return scripted.Text("still working")
}

// TestBadInputOnEverySubject publishes malformed, wrong-type, unknown-version
// and oversized messages on every public and internal subject. Each one a
// consumer cannot use is dead-lettered on herald.dlq.<STREAM> with a reason
// naming what is wrong; a well-formed message for a session that does not
// exist is acknowledged without effect; a payload over the server's max
// payload fails at the publisher with nats.ErrMaxPayload (and through
// Herald's own publisher is claim-checked, then dead-lettered like any bad
// payload). Afterwards a task using tools and memory still completes and
// accounting still drains usage and tool events.
func TestBadInputOnEverySubject(t *testing.T) {
	h := Start(t, badInputScript, WithClickHouse(t), WithConfig(func(c *config.Config) { c.Tenant = "badinput" }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want []deadLetter
	var ignored []acked
	publish := func(subject string, data []byte) uint64 {
		t.Helper()
		ack, err := h.JS.Publish(ctx, subject, data)
		require.NoError(t, err, "publish on %s", subject)
		return ack.Sequence
	}
	oversized := bytes.Repeat([]byte{0xff}, int(h.NC.MaxPayload())+1)
	claimed := func(subject string) {
		t.Helper()
		require.NoError(t, bus.Publish(ctx, h.JS, subject, "", oversized), "Herald's publisher claim-checks %s", subject)
	}

	// herald.tasks (JSON proto.Task, loop-tasks).
	toolResult := mustProto(t, &heraldpb.ToolResult{CallId: "c1", SessionId: "s1", Content: "not a task"})
	for _, c := range []struct {
		data   []byte
		reason string
	}{
		{malformedBytes, "invalid task: not a JSON task object"},
		{toolResult, "invalid task: not a JSON task object"},
		{[]byte(`{"prompt":"hello","version":2}`), `unknown field "version"`},
		{[]byte(`{"prompt":"hello","session_id":"a.b"}`), `field "session_id" may hold only`},
		{[]byte(`{"prompt":""}`), `field "prompt" is required`},
	} {
		publish(bus.TasksSubject, c.data)
		want = append(want, deadLetter{stream: bus.StreamTasks, subject: bus.TasksSubject, data: c.data, reason: c.reason})
	}
	claimed(bus.TasksSubject)
	want = append(want, deadLetter{stream: bus.StreamTasks, subject: bus.TasksSubject, reason: "invalid task: not a JSON task object"})

	// Internal protobuf subjects.
	for i, ps := range protoSubjects {
		for kind, c := range map[string]struct {
			data   []byte
			reason string
		}{
			"malformed": {malformedBytes, ps.malformed},
			"json":      {jsonTask, ps.malformed},
			"future":    {futureProto, ps.future},
		} {
			sid := fmt.Sprintf("bad-%d-%s", i, kind)
			publish(ps.subject(sid), c.data)
			want = append(want, deadLetter{stream: ps.stream, subject: ps.subject(sid), data: c.data, reason: c.reason})
		}
		sid := fmt.Sprintf("bad-%d-claimed", i)
		claimed(ps.subject(sid))
		reason := ps.malformed
		if ps.claimed != "" {
			reason = ps.claimed
		}
		want = append(want, deadLetter{stream: ps.stream, subject: ps.subject(sid), reason: reason})
		if ps.ghost != nil {
			sid := fmt.Sprintf("ghost-%d", i)
			seq := publish(ps.subject(sid), mustProto(t, ps.ghost(sid)))
			ignored = append(ignored, acked{stream: ps.stream, consumer: ps.consumer, subject: ps.subject(sid), seq: seq})
		}
	}

	// Interrupts: the body is not read; any interrupt of a session with no
	// turn running is acknowledged without effect.
	for i, data := range [][]byte{malformedBytes, toolResult, []byte(`{"reason":"x","version":2}`)} {
		sid := fmt.Sprintf("ghost-interrupt-%d", i)
		seq := publish(bus.SessionInterrupt(sid), data)
		ignored = append(ignored, acked{stream: bus.StreamControl, consumer: "loop-control", subject: bus.SessionInterrupt(sid), seq: seq})
	}

	// Oversized on every subject: the client refuses it before it is sent.
	subjects := []string{bus.TasksSubject, bus.SessionInterrupt("big"), bus.SessionInput("big")}
	for _, ps := range protoSubjects {
		subjects = append(subjects, ps.subject("big"))
	}
	for _, subj := range subjects {
		_, err := h.JS.Publish(ctx, subj, oversized)
		require.ErrorIs(t, err, nats.ErrMaxPayload, "oversized publish on %s", subj)
		require.Contains(t, err.Error(), "maximum payload exceeded")
	}
	require.True(t, h.NC.IsConnected(), "the connection survives refused publishes")

	for _, w := range want {
		var got *jetstream.RawStreamMsg
		require.Eventually(t, func() bool { got = findDeadLetter(t, h.JS, w); return got != nil },
			30*time.Second, 50*time.Millisecond, "no dead letter on %s for %s (%q)", bus.DeadLetterSubject(w.stream), w.subject, w.reason)
		require.Contains(t, got.Header.Get(bus.HeaderError), w.reason, "reason of the dead letter for %s", w.subject)
		require.Equal(t, w.stream, got.Header.Get(bus.HeaderStream))
	}
	for _, a := range ignored {
		requireAckedWithoutDeadLetter(t, h.JS, a)
	}
	for _, a := range ignored {
		if sid := strings.Split(a.subject, ".")[2]; strings.HasPrefix(sid, "ghost") {
			_, ok := h.Result(proto.Task{SessionID: sid})
			require.False(t, ok, "%s produced a result", a.subject)
		}
	}
	requireNoSessionState(t, h.JS, "ghost-1", "ghost-6", "ghost-interrupt-0")

	// Each bad message was dead-lettered exactly once.
	for _, stream := range []string{bus.StreamTasks, bus.StreamLLMRequests, bus.StreamLLMResponses, bus.StreamToolCalls,
		bus.StreamToolResults, bus.StreamCompress, bus.StreamCompressResults, bus.StreamUsage, bus.StreamToolEvents, bus.StreamControl} {
		n := 0
		for _, w := range want {
			if w.stream == stream {
				n++
			}
		}
		require.Len(t, heraldtest.DeadLetters(t, h.JS, stream), n, "dead letters of %s", stream)
	}

	// Herald keeps working: tools, memory, the model and accounting.
	task := NewTask("after bad input")
	task.Tenant = "badinput"
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Equal(t, "still working", res.FinalResponse)
	written, err := readWorkspaceFile(h, "after.txt")
	require.NoError(t, err)
	require.Equal(t, "still working", written)
	msgs := h.Transcript(task.SessionID)
	require.Contains(t, toolContents(msgs)[1], "success", "the memory service ran the call")
	// A stale tool result for the finished session changes nothing.
	seq := publish(bus.ToolResult(task.SessionID, "call-stale"), mustProto(t, &heraldpb.ToolResult{
		CallId: "call-stale", SessionId: task.SessionID, Tool: "terminal", Content: "stale", Status: "ok"}))
	requireAckedWithoutDeadLetter(t, h.JS, acked{stream: bus.StreamToolResults, consumer: "loop-tools",
		subject: bus.ToolResult(task.SessionID, "call-stale"), seq: seq})
	require.Len(t, h.Transcript(task.SessionID), len(msgs), "a stale result adds nothing to the transcript")
	for _, stream := range []string{bus.StreamUsage, bus.StreamToolEvents} {
		require.Eventually(t, func() bool { return streamMsgs(t, h.JS, stream) == 0 }, 30*time.Second, 50*time.Millisecond,
			"accounting drains %s after the bad input", stream)
	}
}

// TestGarbageOnTheInputSubjectIsIgnoredWhileAToolWaits: answers arrive on
// herald.session.<sid>.input by core subscription (no durable consumer, so
// no dead letter): while the clarify tool waits, malformed, wrong-type and
// unknown-field payloads and answers to other requests are skipped, and
// the real answer still reaches the model.
func TestGarbageOnTheInputSubjectIsIgnoredWhileAToolWaits(t *testing.T) {
	script := func(r *scripted.Request) scripted.Reply {
		if r.AssistantCount() == 0 {
			return scripted.Tool("clarify", `{"question":"Which colour?"}`)
		}
		return scripted.Text("you said: " + r.LastMessage().Text())
	}
	h := Start(t, script, WithConfig(func(c *config.Config) { c.Approvals.Timeout = 30 * time.Second }))
	task := NewTask("ask me")
	asked := make(chan proto.Event, 1)
	sub, err := h.NC.Subscribe(bus.SessionEvents(task.SessionID), func(m *nats.Msg) {
		var ev proto.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == proto.EventClarify {
			asked <- ev
		}
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	h.Submit(task)
	var ev proto.Event
	select {
	case ev = <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the clarify question was never asked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subject := bus.SessionInput(task.SessionID)
	for _, data := range [][]byte{malformedBytes, futureProto, []byte(`{"request_id":5}`),
		[]byte(`{"request_id":"someone-else","answer":"red"}`), []byte(`{"request_id":"` + ev.RequestID + `","answer":"green","version":2}`)[:10]} {
		_, err := h.JS.Publish(ctx, subject, data)
		require.NoError(t, err)
	}
	answer, err := json.Marshal(proto.Input{RequestID: ev.RequestID, Answer: "blue"})
	require.NoError(t, err)
	_, err = h.JS.Publish(ctx, subject, answer)
	require.NoError(t, err)
	res := h.WaitResult(task, 30*time.Second)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	require.Contains(t, res.FinalResponse, "the user answered: blue")
	require.Empty(t, heraldtest.DeadLetters(t, h.JS, bus.StreamControl))
}

func findDeadLetter(t *testing.T, js jetstream.JetStream, w deadLetter) *jetstream.RawStreamMsg {
	for _, m := range heraldtest.DeadLetters(t, js, w.stream) {
		if m.Header.Get(bus.HeaderSubject) != w.subject {
			continue
		}
		if w.data == nil && m.Header.Get(bus.HeaderClaim) != "" || w.data != nil && bytes.Equal(m.Data, w.data) {
			return m
		}
	}
	return nil
}

// requireAckedWithoutDeadLetter waits until the consumer has acknowledged
// a.seq, then checks no dead letter names a.subject.
func requireAckedWithoutDeadLetter(t *testing.T, js jetstream.JetStream, a acked) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := js.Consumer(ctx, a.stream, a.consumer)
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream >= a.seq
	}, 30*time.Second, 50*time.Millisecond, "%s never acknowledged %s", a.consumer, a.subject)
	for _, m := range heraldtest.DeadLetters(t, js, a.stream) {
		require.NotEqual(t, a.subject, m.Header.Get(bus.HeaderSubject), "%s was dead-lettered: %s", a.subject, m.Header.Get(bus.HeaderError))
	}
}

// requireNoSessionState checks no session state was created for sids.
func requireNoSessionState(t *testing.T, js jetstream.JetStream, sids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	for _, sid := range sids {
		_, err := kv.Get(ctx, sid)
		require.True(t, errors.Is(err, jetstream.ErrKeyNotFound), "session %s has state (err %v)", sid, err)
	}
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := bus.PendingWork(ctx, js, stream)
	require.NoError(t, err)
	return n
}
