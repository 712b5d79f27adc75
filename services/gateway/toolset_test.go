package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/pkg/toolset"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// A request that names its tool set by digest reaches the model with the
// set's definitions, on every call; one naming a set nobody stored is
// dead-lettered with the reason and never reaches the model.
func TestToolSetsReferredToByDigest(t *testing.T) {
	r := newRig(t, scripted.Conversation(scripted.Text("fine")))
	ctx := context.Background()
	tools := []*heraldpb.ToolSpec{{Name: "read_file", Description: "Read a file.",
		ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}}}`}}
	data, digest, err := toolset.Encode(tools)
	require.NoError(t, err)

	unknown := r.request("s-tools", "hi")
	_, unknown.ToolsDigest, err = toolset.Encode(append(tools, &heraldpb.ToolSpec{Name: "terminal"}))
	require.NoError(t, err)
	r.publish(unknown)

	require.NoError(t, toolset.NewStore(r.bus.JS).Refer(ctx, data, digest))
	for range 2 {
		req := r.request("s-tools", "hi")
		req.ToolsDigest = digest
		require.Equal(t, "fine", r.call(req).GetMessage().GetContent())
	}
	require.Equal(t, 2, r.model.Calls(), "the request naming an unknown set never reached the model")
	for _, got := range r.model.Requests() {
		require.Len(t, got.Tools, 1)
		var tool struct {
			Type     string `json:"type"`
			Function struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"function"`
		}
		require.NoError(t, json.Unmarshal(got.Tools[0], &tool))
		require.Equal(t, "read_file", tool.Function.Name)
		require.Contains(t, tool.Function.Parameters, "properties")
	}
	require.Eventually(t, func() bool {
		return len(heraldtest.DeadLetters(t, r.bus.JS, bus.StreamLLMRequests)) == 1
	}, 5*time.Second, 10*time.Millisecond)
	dl := heraldtest.DeadLetters(t, r.bus.JS, bus.StreamLLMRequests)[0]
	require.Contains(t, dl.Header.Get(bus.HeaderError), "no tool set is stored under this digest")
}
