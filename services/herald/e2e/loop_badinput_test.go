package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

func TestLoopDeadLettersMalformedInputsAndKeepsWorking(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Text("still here")))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	garbage := []byte{0xff, 0xff, 0xff}
	_, err := h.JS.Publish(ctx, bus.LLMResponse(bus.OwnerLoop, "sx"), garbage)
	require.NoError(t, err)
	_, err = h.JS.Publish(ctx, bus.ToolResult("sx", "c1"), garbage)
	require.NoError(t, err)
	_, err = h.JS.Publish(ctx, bus.CompressResult("sx"), garbage)
	require.NoError(t, err)
	require.NoError(t, bus.PublishProto(ctx, h.JS, bus.ToolResult("sx", "c2"), "", &heraldpb.ToolResult{CallId: "c2", SessionId: "not a token"}))

	res := h.Run(NewTask("are you still working"))
	require.Equal(t, proto.ExitTextResponse, res.ExitReason)
	require.Equal(t, "still here", res.FinalResponse)

	for stream, want := range map[string]int{bus.StreamLLMResponses: 1, bus.StreamToolResults: 2, bus.StreamCompressResults: 1} {
		require.Eventually(t, func() bool {
			dead := heraldtest.DeadLetters(t, h.JS, stream)
			for _, m := range dead {
				require.NotEmpty(t, m.Header.Get(bus.HeaderError), "a dead letter says why")
			}
			return len(dead) == want
		}, 10*time.Second, 20*time.Millisecond, "dead letters of %s", stream)
	}
}
