package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/transcript"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// storeLog appends msgs to the transcript log sid as the loop does and
// returns the chain hash through each.
func storeLog(t *testing.T, r *rig, sid string, msgs ...*heraldpb.ChatMessage) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var chains []uint64
	chain := uint64(0)
	for i, m := range msgs {
		next := transcript.Chain(chain, m)
		e := &heraldpb.TranscriptEntry{SessionId: sid, Index: int32(i), Message: m, Chain: next, PrevChain: chain}
		require.NoError(t, bus.PublishProto(ctx, r.bus.JS, bus.SessionLog(sid), "", e))
		chains, chain = append(chains, next), next
	}
	return chains
}

func contents(msgs []scripted.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role+":"+m.Text())
	}
	return out
}

// A request that refers to the transcript reaches the model with the whole
// history: the start read from the log by a gateway that never saw the
// session (a restart, another gateway), the carried entries, then the
// request's own messages; the next request carries only what is new and is
// served from what the gateway kept, even after the log's start is gone.
func TestReferredHistoryReachesTheModelWhole(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("one"), scripted.Text("two")))
	log := []*heraldpb.ChatMessage{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "first question"},
		{Role: "assistant", Content: "first answer"},
		{Role: "user", Content: "second question"},
	}
	chains := storeLog(t, r, "s-ref", log...)

	req := r.request("s-ref", "")
	req.Messages = []*heraldpb.ChatMessage{{Role: "user", Content: "a reminder", Scaffolding: true}}
	req.History = &heraldpb.TranscriptRef{LogId: "s-ref", From: 2, FromChain: chains[1], Entries: log[2:4], Chain: chains[3]}
	require.Empty(t, r.call(req).GetError())
	require.Equal(t, []string{"system:You are terse.", "user:first question", "assistant:first answer",
		"user:second question", "user:a reminder"}, contents(r.model.Requests()[0].Messages))

	// the log is purged: the next step is built from what the gateway kept
	ctx := context.Background()
	st, err := r.bus.JS.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx))
	more := []*heraldpb.ChatMessage{{Role: "assistant", Content: "second answer"}, {Role: "user", Content: "third"}}
	chain := transcript.Chain(transcript.Chain(chains[3], more[0]), more[1])
	next := r.request("s-ref", "")
	next.Messages = nil
	next.History = &heraldpb.TranscriptRef{LogId: "s-ref", From: 4, FromChain: chains[3], Entries: more, Chain: chain}
	require.Empty(t, r.call(next).GetError())
	require.Equal(t, []string{"system:You are terse.", "user:first question", "assistant:first answer",
		"user:second question", "assistant:second answer", "user:third"}, contents(r.model.Requests()[1].Messages))
}

// A reference the log cannot back (entries that do not hash to the chain,
// a start the log does not hold) never reaches the model: it is
// dead-lettered with its reason, and the next request is answered.
func TestHistoryThatDoesNotMatchItsChainIsDeadLettered(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("fine")))
	log := []*heraldpb.ChatMessage{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "hi"}}
	chains := storeLog(t, r, "s-bad", log...)

	forged := r.request("s-bad", "")
	forged.Messages = nil
	forged.History = &heraldpb.TranscriptRef{LogId: "s-bad", From: 1, FromChain: chains[0],
		Entries: []*heraldpb.ChatMessage{{Role: "user", Content: "something else"}}, Chain: chains[1]}
	r.publish(forged)
	wrongStart := r.request("s-bad", "")
	wrongStart.History = &heraldpb.TranscriptRef{LogId: "s-bad", From: 2, FromChain: 12345, Chain: 12345}
	r.publish(wrongStart)

	resp := r.call(r.request("s-bad", "hello"))
	require.Equal(t, "fine", resp.GetMessage().GetContent())
	require.Eventually(t, func() bool {
		return len(heraldtest.DeadLetters(t, r.bus.JS, bus.StreamLLMRequests)) == 2
	}, 5*time.Second, 10*time.Millisecond)
	reasons := ""
	for _, dl := range heraldtest.DeadLetters(t, r.bus.JS, bus.StreamLLMRequests) {
		reasons += dl.Header.Get(bus.HeaderError) + "\n"
	}
	require.Contains(t, reasons, "do not match their chain")
	require.Contains(t, reasons, "are not the ones the request refers to")
	require.Equal(t, 1, r.model.Calls(), "no unverifiable history reached the model")
}

// The histories a gateway keeps stay within their bounds: a history over
// the byte bound is not kept, and keeping one evicts others as needed.
func TestKeptHistoriesStayWithinTheirBounds(t *testing.T) {
	h := newHistories(nil)
	h.maxLogs, h.maxBytes = 3, 1000
	kept := func(size int) *logHistory {
		return &logHistory{msgs: []*heraldpb.ChatMessage{{}}, chains: []uint64{1}, sizes: []int{size}}
	}
	for i, log := range []string{"a", "b", "c", "d"} {
		h.remember(log, kept(100+i))
	}
	require.Len(t, h.cache, 3, "at most maxLogs logs")
	h.remember("big", kept(1001))
	require.NotContains(t, h.cache, "big", "a history over the byte bound is not kept")
	h.remember("e", kept(900))
	require.Contains(t, h.cache, "e")
	total := 0
	for _, c := range h.cache {
		total += c.charged
	}
	require.LessOrEqual(t, total, 1000)
	require.Equal(t, total, h.bytes)
	h.remember("e", kept(50))
	require.Equal(t, h.cache["e"].size(), 50, "a log's newer history replaces its older one")
	total = 0
	for _, c := range h.cache {
		total += c.charged
	}
	require.Equal(t, total, h.bytes)
}

// A history's kept provider encodings count toward the byte bound.
func TestKeptEncodingsCountTowardTheBound(t *testing.T) {
	h := newHistories(nil)
	h.maxLogs, h.maxBytes = 3, 1000
	withWire := func(size, encoded int) *logHistory {
		slot := &wireSlot{}
		slot.put(&chatEncoder{}, make([]byte, encoded))
		return &logHistory{msgs: []*heraldpb.ChatMessage{{}}, chains: []uint64{1}, sizes: []int{size}, wire: []*wireSlot{slot}}
	}
	h.remember("a", withWire(400, 500))
	require.Contains(t, h.cache, "a")
	require.Equal(t, 900, h.bytes)
	h.remember("b", withWire(400, 700))
	require.NotContains(t, h.cache, "b", "messages and encodings together are over the bound")
	h.remember("c", withWire(100, 100))
	require.Contains(t, h.cache, "c")
	require.NotContains(t, h.cache, "a", "a was evicted to make room")
	require.Equal(t, 200, h.bytes)
}
