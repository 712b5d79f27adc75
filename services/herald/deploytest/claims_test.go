package deploytest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestPayloadsOverMaxPayloadPassUnderEachUser: a message larger than the
// server's max payload goes through the claim store (pkg/bus claim-check);
// each writer can store one under its own user and its reader can resolve it
// under its own.
func TestPayloadsOverMaxPayloadPassUnderEachUser(t *testing.T) {
	s := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := s.declared(t)
	big := bytes.Repeat([]byte("a long history "), (9<<20)/15) // over the 8 MiB max payload
	workQueue := map[string]bool{}
	for _, cfg := range bus.Streams(1) {
		workQueue[cfg.Name] = cfg.Retention == jetstream.WorkQueuePolicy
	}

	for _, c := range []struct {
		writer, reader, stream, subject string
	}{
		{"loop", "gateway", bus.StreamLLMRequests, bus.LLMRequest("s-big")},
		{"gateway", "loop", bus.StreamLLMResponses, bus.LLMResponse(bus.OwnerLoop, "s-big")},
		{"gateway", "compressor", bus.StreamLLMResponses, bus.LLMResponse(bus.OwnerCompressor, "s-big")},
		{"loop", "toolrunner", bus.StreamToolCalls, bus.ToolCall(bus.DefaultPool, "s-big")},
		{"toolrunner", "loop", bus.StreamToolResults, bus.ToolResult("s-big", "c1")},
		{"memory", "loop", bus.StreamToolResults, bus.ToolResult("s-big", "m1")},
		{"loop", "compressor", bus.StreamCompress, bus.CompressRequest("s-big")},
		{"compressor", "loop", bus.StreamCompressResults, bus.CompressResult("s-big")},
		{"loop", "client", bus.StreamSessions, bus.SessionResult("s-big")},
		{"loop", "memory", bus.StreamSessions, bus.SessionLog("s-big")},
		{"loop", "gateway", bus.StreamSessions, bus.SessionLog("s-big")},
		{"client", "loop", bus.StreamTasks, bus.TasksSubject},
		{"gateway", "accounting", bus.StreamUsage, bus.UsageSubject("acme")},
		{"memory", "accounting", bus.StreamToolEvents, bus.ToolEventSubject("acme")},
	} {
		w, r := s.connect(t, c.writer), s.connect(t, c.reader)
		require.NoError(t, bus.Publish(ctx, w.js, c.subject, c.writer+":"+c.subject, big), "%s stores a large payload on %s", c.writer, c.subject)
		// a retry stores the same claim again, replacing (purging) the first copy
		require.NoError(t, bus.Publish(ctx, w.js, c.subject, c.writer+":"+c.subject, big), "%s retries the publish", c.writer)
		st, err := admin.js.Stream(ctx, c.stream)
		require.NoError(t, err)
		raw, err := st.GetLastMsgForSubject(ctx, c.subject)
		require.NoError(t, err)
		require.NotEmpty(t, raw.Header.Get(bus.HeaderClaim), "%s: the message carries a claim", c.subject)
		got, err := bus.Resolve(ctx, r.js, raw.Subject, raw.Header, raw.Data)
		require.NoError(t, err, "%s resolves the claim on %s; server refused: %v", c.reader, c.subject, s.violations())
		require.True(t, bytes.Equal(big, got), "%s reads back the whole payload", c.reader)
		if workQueue[c.stream] {
			require.NoError(t, bus.DropClaim(ctx, r.js, raw.Subject, raw.Header),
				"%s deletes the claim of a message it handled; server refused: %v", c.reader, s.violations())
		}
	}
	require.Empty(t, s.violations())

	// A claim is readable only by who may read its stream: a tool runner
	// cannot read a claimed model request or transcript, nor the gateway a
	// claimed tool call.
	for _, c := range []struct{ reader, stream, subject string }{
		{"toolrunner", bus.StreamLLMRequests, bus.LLMRequest("s-big")},
		{"toolrunner", bus.StreamSessions, bus.SessionLog("s-big")},
		{"gateway", bus.StreamToolCalls, bus.ToolCall(bus.DefaultPool, "s-big")},
		{"client", bus.StreamLLMResponses, bus.LLMResponse(bus.OwnerLoop, "s-big")},
		{"accounting", bus.StreamSessions, bus.SessionLog("s-big")},
	} {
		st, err := admin.js.Stream(ctx, c.stream)
		require.NoError(t, err)
		raw, err := st.GetLastMsgForSubject(ctx, c.subject)
		require.NoError(t, err)
		r := s.connect(t, c.reader)
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = bus.Resolve(rctx, r.js, raw.Subject, raw.Header, raw.Data)
		cancel()
		require.Error(t, err, "%s must not read the claim on %s", c.reader, c.subject)
		r.requireDenied("publish", "$JS.API.STREAM.INFO."+"OBJ_"+bus.ClaimStore(c.stream))
	}
}
