package gateway

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// staleCase is a redelivered request and the session record the loop left.
type staleCase struct {
	session, requestID string
	record             string // JSON as the loop stores it; "" for none
	sent               bool   // must the request reach the model?
}

// Records follow services/loop/state.go: the loop numbers model requests
// "<sid>:<turn>:<step>:<attempt>" and compressions "<sid>:c<n>" (the
// compressor's summary call adds ":summary").
var staleCases = []staleCase{
	{session: "moved", requestID: "moved:1:2:0", sent: false,
		record: `{"session_id":"moved","status":"thinking","turn":1,"step":3,"attempt":0,"pending":{"kind":"llm","request_id":"moved:1:3:0"}}`},
	{session: "retried", requestID: "retried:1:2:0", sent: false,
		record: `{"session_id":"retried","status":"thinking","turn":1,"step":2,"attempt":1,"pending":{"kind":"llm","request_id":"retried:1:2:1"}}`},
	{session: "acting", requestID: "acting:1:2:0", sent: false,
		record: `{"session_id":"acting","status":"acting","turn":1,"step":2,"attempt":0,"pending":{"kind":"tools"}}`},
	{session: "ended", requestID: "ended:1:4:0", sent: false, // its final step
		record: `{"session_id":"ended","status":"idle","turn":1,"step":4,"attempt":0}`},
	{session: "nextturn", requestID: "nextturn:1:4:0", sent: false,
		record: `{"session_id":"nextturn","status":"thinking","turn":2,"step":1,"attempt":0,"pending":{"kind":"llm","request_id":"nextturn:2:1:0"}}`},
	{session: "summarised", requestID: "summarised:c1:summary", sent: false,
		record: `{"session_id":"summarised","status":"thinking","turn":1,"step":5,"compress_attempts":1,"pending":{"kind":"llm","request_id":"summarised:1:5:0"}}`},
	// In flight when its gateway died: the session still waits for it.
	{session: "waits", requestID: "waits:1:2:0", sent: true,
		record: `{"session_id":"waits","status":"thinking","turn":1,"step":2,"attempt":0,"pending":{"kind":"llm","request_id":"waits:1:2:0"}}`},
	{session: "compressing", requestID: "compressing:c2:summary", sent: true,
		record: `{"session_id":"compressing","status":"compressing","turn":1,"step":5,"compress_attempts":2,"pending":{"kind":"compress","request_id":"compressing:c2"}}`},
	// Published before the transition that sent it committed.
	{session: "ahead", requestID: "ahead:1:3:0", sent: true,
		record: `{"session_id":"ahead","status":"acting","turn":1,"step":2,"attempt":0,"pending":{"kind":"tools"}}`},
	{session: "norecord", requestID: "norecord:1:1:0", sent: true},
}

func TestRedeliveredRequestTheSessionMovedPastIsNotSent(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("fresh")))
	ctx := context.Background()
	kv, err := r.bus.JS.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	var wantSent []string
	for _, c := range staleCases {
		if c.record != "" {
			_, err := kv.Put(ctx, c.session, []byte(c.record))
			require.NoError(t, err)
		}
		req := r.request(c.session, "prompt of "+c.session)
		req.RequestId = c.requestID
		r.publish(req)
		if c.sent {
			wantSent = append(wantSent, c.session)
		}
	}

	// A gateway takes every request and dies before acknowledging them: all
	// come back, delivered a second time, to the next gateway.
	crashed, err := r.bus.JS.CreateOrUpdateConsumer(ctx, bus.StreamLLMRequests, jetstream.ConsumerConfig{
		Durable: Durable, FilterSubject: bus.LLMRequest(">"), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 4096})
	require.NoError(t, err)
	taken := map[uint64]bool{} // stream sequences: a nak'd message may come back first
	require.Eventually(t, func() bool {
		batch, err := crashed.FetchNoWait(len(staleCases))
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			require.NoError(t, err)
			taken[meta.Sequence.Stream] = true
			require.NoError(t, m.Nak())
		}
		return len(taken) == len(staleCases)
	}, 10*time.Second, 10*time.Millisecond, "every request was taken once")

	r.start()
	require.Eventually(t, func() bool {
		n, err := bus.PendingWork(ctx, r.bus.JS, bus.StreamLLMRequests)
		return err == nil && n == 0
	}, 10*time.Second, 5*time.Millisecond, "every redelivered request is acknowledged")
	require.Eventually(t, func() bool { return r.svc.Stats().Calls == int64(len(wantSent)) }, 10*time.Second, 5*time.Millisecond)

	var gotSent []string
	for _, req := range r.model.Requests() {
		gotSent = append(gotSent, req.Messages[len(req.Messages)-1].Text()[len("prompt of "):])
	}
	sort.Strings(gotSent)
	sort.Strings(wantSent)
	require.Equal(t, wantSent, gotSent, "only requests their sessions still wait for reach the model")
	require.Equal(t, int64(len(staleCases)-len(wantSent)), r.svc.Stats().Stale, "each dropped request is counted")
	usage := r.usageEvents()
	require.Len(t, usage, len(wantSent), "nothing dropped is billed")
	for _, c := range staleCases {
		_, err := bus.LastOnSubject(ctx, r.bus.JS, bus.StreamLLMResponses, bus.LLMResponse(bus.OwnerLoop, c.session))
		if c.sent {
			require.NoError(t, err, "%s is answered", c.session)
		} else {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "%s gets no answer: no one waits for it", c.session)
		}
	}
}

// A first delivery is never checked: it is the request's one send, and the
// state that expects it may not be committed yet.
func TestFirstDeliveryIsSentWhateverTheRecordSays(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("fresh")))
	ctx := context.Background()
	kv, err := r.bus.JS.KeyValue(ctx, bus.BucketSessions)
	require.NoError(t, err)
	_, err = kv.Put(ctx, "old", []byte(`{"session_id":"old","status":"idle","turn":3,"step":9}`))
	require.NoError(t, err)
	req := r.request("old", "hello")
	req.RequestId = "old:1:1:0"
	require.Equal(t, "fresh", r.call(req).GetMessage().GetContent())
	require.Equal(t, 1, r.model.Calls())
	require.Zero(t, r.svc.Stats().Stale)
}

func TestMovedPastReadsTheLoopsRequestIDs(t *testing.T) {
	v := sessionView{Turn: 2, Step: 3, Attempt: 1, CompressAttempts: 2,
		Pending: &pendingView{Kind: pendingLLM, RequestID: "s:2:3:1"}}
	for id, want := range map[string]bool{
		"s:2:3:1": false, "s:2:3:2": false, "s:2:4:0": false, "s:3:1:0": false, // current or ahead
		"s:2:3:0": true, "s:2:2:5": true, "s:1:9:9": true, // behind
		"s:c1:summary": true, "s:c2:summary": true, "s:c3:summary": false,
		"s:1:2:main": false, "weird": false, "s:cX:summary": false, // not the loop's: never dropped
		"a:b:2:3:0": true, // session ids may hold colons; the position is the last three parts
	} {
		require.Equal(t, want, v.movedPast(id), id)
	}
}

// A gateway that cannot read session records (here the bucket is gone)
// sends a redelivered request rather than leave its session waiting.
func TestRedeliveredRequestIsSentWhenTheRecordCannotBeRead(t *testing.T) {
	r := buildRig(t, scripted.Conversation(scripted.Text("fresh")))
	ctx := context.Background()
	require.NoError(t, r.bus.JS.DeleteKeyValue(ctx, bus.BucketSessions))
	req := r.request("unread", "hello")
	req.RequestId = "unread:1:1:0"
	r.publish(req)
	die := r.takeAndDie(1)
	die()
	r.start()
	require.Equal(t, "fresh", r.awaitResponse(req, 10*time.Second).GetMessage().GetContent())
	require.Equal(t, 1, r.model.Calls())
	require.Zero(t, r.svc.Stats().Stale)
}
