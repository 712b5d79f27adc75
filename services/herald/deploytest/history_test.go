package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/transcript"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// TestGatewayReadsTheTranscriptARequestRefersTo: a model request refers to
// the session's transcript (heraldpb.TranscriptRef), so the gateway reads
// transcript entries from SESSIONS, and cannot write or subscribe to them.
func TestGatewayReadsTheTranscriptARequestRefersTo(t *testing.T) {
	s := startSecured(t)
	s.declared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	loop := s.connect(t, "loop")
	chain := uint64(0)
	for i, text := range []string{"you are helpful", "hello"} {
		m := &heraldpb.ChatMessage{Role: "user", Content: text}
		next := transcript.Chain(chain, m)
		e := &heraldpb.TranscriptEntry{SessionId: "s1", Index: int32(i), Message: m, Chain: next, PrevChain: chain}
		require.NoError(t, bus.PublishProto(ctx, loop.js, bus.SessionLog("s1"), "", e))
		chain = next
	}

	gw := s.connect(t, "gateway")
	entries, err := transcript.ReadEntries(ctx, gw.js, "s1", 2, chain)
	require.NoError(t, err, "server refused: %v", s.violations())
	require.Equal(t, "hello", entries[1].GetMessage().GetContent())
	require.Empty(t, s.violations(), "reading is allowed")

	require.NoError(t, gw.nc.Publish(bus.SessionLog("s1"), []byte("forged")))
	gw.requireDenied("publish", bus.SessionLog("s1"))
}
