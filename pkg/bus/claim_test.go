package bus_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// smallBus is a server that accepts at most 256 KiB per message.
func smallBus(t *testing.T) jetstream.JetStream {
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), MaxPayload: 256 << 10, Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, bus.Ensure(context.Background(), js, 1))
	return js
}

func TestPayloadsOverTheServerLimitTravelByClaim(t *testing.T) {
	js := smallBus(t)
	big := bytes.Repeat([]byte("history "), 1<<17) // 1 MiB, four times the limit
	got := make(chan []byte, 1)
	w, err := bus.StartWorker(context.Background(), js, bus.ConsumerSpec{Stream: bus.StreamToolResults, Durable: "t",
		FilterSubjects: []string{"herald.tool.result.>"}}, func(_ context.Context, m jetstream.Msg) error {
		got <- m.Data()
		return nil
	}, heraldtest.Logger(t))
	require.NoError(t, err)
	defer w.Stop(context.Background())

	subject := bus.ToolResult("s1", "c1")
	require.NoError(t, bus.Publish(context.Background(), js, subject, "s1:c1", big))
	select {
	case data := <-got:
		require.Equal(t, big, data, "the handler sees the whole payload")
	case <-time.After(10 * time.Second):
		t.Fatal("the claimed message never arrived")
	}
	raw, err := bus.LastOnSubject(context.Background(), js, bus.StreamToolResults, subject)
	require.NoError(t, err)
	require.Equal(t, big, raw.Data, "readers of stored messages see it whole too")

	small := []byte("small")
	require.NoError(t, bus.Publish(context.Background(), js, bus.ToolResult("s1", "c2"), "", small))
	raw, err = bus.LastOnSubject(context.Background(), js, bus.StreamToolResults, bus.ToolResult("s1", "c2"))
	require.NoError(t, err)
	require.Empty(t, raw.Header.Get(bus.HeaderClaim), "small payloads travel inline")
	require.Equal(t, small, raw.Data)
}

func TestAMissingClaimIsDeadLetteredWithItsName(t *testing.T) {
	js := smallBus(t)
	require.NoError(t, bus.Publish(context.Background(), js, bus.TasksSubject, "big", bytes.Repeat([]byte("x"), 512<<10)))
	obj, err := js.ObjectStore(context.Background(), bus.ClaimStore(bus.StreamTasks))
	require.NoError(t, err)
	require.NoError(t, obj.Delete(context.Background(), "c-big"))
	w, err := bus.StartWorker(context.Background(), js, bus.ConsumerSpec{Stream: bus.StreamTasks, Durable: "t",
		FilterSubjects: []string{bus.TasksSubject}}, func(context.Context, jetstream.Msg) error { return nil }, heraldtest.Logger(t))
	require.NoError(t, err)
	defer w.Stop(context.Background())
	require.Eventually(t, func() bool { return len(heraldtest.DeadLetters(t, js, bus.StreamTasks)) == 1 }, 10*time.Second, 10*time.Millisecond)
	dl := heraldtest.DeadLetters(t, js, bus.StreamTasks)[0]
	require.Contains(t, dl.Header.Get(bus.HeaderError), "c-big")
	require.Equal(t, "c-big", dl.Header.Get(bus.HeaderClaim))
	require.Equal(t, "herald_claims_tasks", dl.Header.Get(bus.HeaderClaimStore))
}

// Each stream's claims live in that stream's own store, and a stream that
// keeps no claims refuses an oversized payload with a clear error.
func TestClaimsLiveInTheirStreamsStore(t *testing.T) {
	js := smallBus(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte("y"), 512<<10)
	require.NoError(t, bus.Publish(ctx, js, bus.LLMRequest("s1"), "r1", big))
	raw, err := bus.LastOnSubject(ctx, js, bus.StreamLLMRequests, bus.LLMRequest("s1"))
	require.NoError(t, err)
	require.Equal(t, big, raw.Data)
	require.Equal(t, "herald_claims_llm_requests", raw.Header.Get(bus.HeaderClaimStore))
	for _, stream := range bus.ClaimStreams {
		if stream == bus.StreamLLMRequests {
			continue
		}
		obj, err := js.ObjectStore(ctx, bus.ClaimStore(stream))
		require.NoError(t, err)
		_, err = obj.GetInfo(ctx, "c-r1")
		require.ErrorIs(t, err, jetstream.ErrObjectNotFound, "the claim is not in %s's store", stream)
	}

	err = bus.Publish(ctx, js, bus.SessionInput("s1"), "i1", big)
	require.ErrorContains(t, err, "over the server's max payload and stream CONTROL keeps no claims")
}

func TestSubjectsFindTheirClaimStore(t *testing.T) {
	for subject, store := range map[string]string{
		bus.TasksSubject:                           "herald_claims_tasks",
		bus.SessionLog("s1"):                       "herald_claims_sessions",
		bus.ToolCall(bus.DefaultPool, "s1"):        "herald_claims_tool_calls",
		bus.LLMResponse(bus.OwnerCompressor, "s1"): "herald_claims_llm_responses",
	} {
		got, err := bus.ClaimStoreFor(subject)
		require.NoError(t, err, subject)
		require.Equal(t, store, got, subject)
	}
	_, err := bus.ClaimStoreFor("herald.nowhere")
	require.ErrorContains(t, err, "no stream stores herald.nowhere")
}

// A work queue's claimed payload is deleted once its message is handled
// (nothing reads it again); a claim on a stream that keeps its messages
// stays as long as they do.
func TestHandledWorkQueueClaimsAreDeleted(t *testing.T) {
	js := smallBus(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte("z"), 512<<10)
	handled := make(chan struct{}, 2)
	for _, spec := range []bus.ConsumerSpec{
		{Stream: bus.StreamToolCalls, Durable: "calls", FilterSubjects: []string{"herald.tool.call.>"}},
		{Stream: bus.StreamToolResults, Durable: "results", FilterSubjects: []string{"herald.tool.result.>"}},
	} {
		w, err := bus.StartWorker(ctx, js, spec, func(context.Context, jetstream.Msg) error {
			handled <- struct{}{}
			return nil
		}, heraldtest.Logger(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.Stop(context.Background()) })
	}
	require.NoError(t, bus.Publish(ctx, js, bus.ToolCall(bus.DefaultPool, "s1"), "call-1", big))
	require.NoError(t, bus.Publish(ctx, js, bus.ToolResult("s1", "c1"), "result-1", big))
	for range 2 {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatal("a claimed message was not handled")
		}
	}
	calls, err := js.ObjectStore(ctx, bus.ClaimStore(bus.StreamToolCalls))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := calls.GetInfo(ctx, "c-call-1")
		return errors.Is(err, jetstream.ErrObjectNotFound)
	}, 10*time.Second, 10*time.Millisecond, "the handled tool call's payload is deleted")
	results, err := js.ObjectStore(ctx, bus.ClaimStore(bus.StreamToolResults))
	require.NoError(t, err)
	_, err = results.GetInfo(ctx, "c-result-1")
	require.NoError(t, err, "a tool result's payload stays readable with its message")
	raw, err := bus.LastOnSubject(ctx, js, bus.StreamToolResults, bus.ToolResult("s1", "c1"))
	require.NoError(t, err)
	require.Equal(t, big, raw.Data)
}
