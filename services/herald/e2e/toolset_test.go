package e2e

import (
	"context"
	"sync"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

// runWatchingRequests runs a task and returns the LLM requests it sent, as
// the bus carried them.
func runWatchingRequests(t *testing.T, h *H, task proto.Task) []*heraldpb.LLMRequest {
	t.Helper()
	var mu sync.Mutex
	var reqs []*heraldpb.LLMRequest
	sub, err := h.NC.Subscribe(bus.LLMRequest(task.SessionID), func(m *nats.Msg) {
		req := &heraldpb.LLMRequest{}
		if gproto.Unmarshal(m.Data, req) == nil {
			mu.Lock()
			reqs = append(reqs, req)
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	res := h.Run(task)
	require.NoError(t, sub.Unsubscribe())
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "error: %s", res.Error)
	mu.Lock()
	defer mu.Unlock()
	return reqs
}

// Sessions offered the same tools store the set once and name it in every
// request, which carries no definitions; the model still gets them all.
func TestRequestsNameTheirToolSetStoredOnce(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Tool("todo", `{"todos":[]}`), scripted.Text("done")))
	var digests []string
	for range 3 {
		for _, req := range runWatchingRequests(t, h, NewTask("plan")) {
			require.Empty(t, req.GetTools(), "definitions travelled in the request")
			require.NotEmpty(t, req.GetToolsDigest())
			digests = append(digests, req.GetToolsDigest())
		}
	}
	require.Len(t, digests, 6)
	for _, d := range digests {
		require.Equal(t, digests[0], d, "the same tools, the same set")
	}
	ctx := context.Background()
	kv, err := h.JS.KeyValue(ctx, bus.BucketToolSets)
	require.NoError(t, err)
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	var stored []string
	for k := range keys.Keys() {
		stored = append(stored, k)
	}
	require.Equal(t, []string{digests[0]}, stored)
	for _, got := range h.Model.Requests() {
		require.Greater(t, len(got.Tools), 5, "the model was offered the built-in tools")
	}

}

// Where the tool-set bucket is missing (a server declared by an older
// version), the definitions travel in the requests as before and sessions
// carry on.
func TestWithoutTheToolSetBucketDefinitionsTravelInTheRequests(t *testing.T) {
	h := Start(t, scripted.Conversation(scripted.Tool("todo", `{"todos":[]}`), scripted.Text("done")))
	ctx := context.Background()
	require.NoError(t, h.JS.DeleteKeyValue(ctx, bus.BucketToolSets))
	reqs := runWatchingRequests(t, h, NewTask("plan"))
	require.Len(t, reqs, 2)
	for _, req := range reqs {
		require.Empty(t, req.GetToolsDigest())
		require.Greater(t, len(req.GetTools()), 5)
	}
	for _, got := range h.Model.Requests() {
		require.Len(t, got.Tools, len(reqs[0].GetTools()))
	}
}
