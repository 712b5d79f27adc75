package gateway

import (
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// A request that names its model (herald run --model, chat's /model) is
// told about in that model's name: retry events and the final error say
// which model was called, never the configured default.
func TestRetriesAndErrorsNameTheModelCalled(t *testing.T) {
	r := newRig(t, scripted.Conversation(serverError), func(c *Config) { c.MaxAttempts = 2 })
	ev := r.watch("rm1")
	req := r.request("rm1", "hello")
	req.Model = "chosen-model"
	resp := r.call(req)

	require.Equal(t, "chosen-model", r.model.Requests()[0].Model)
	require.Contains(t, resp.GetError(), "(model chosen-model)")
	require.NotContains(t, resp.GetError(), "model m1", "the configured default was not called")
	require.Eventually(t, func() bool { return len(ev.ofType(proto.EventRetry)) == 1 }, 5*time.Second, 5*time.Millisecond)
	retry := ev.ofType(proto.EventRetry)[0]
	require.Equal(t, "chosen-model", retry.Model)
	require.Contains(t, retry.Message, "(model chosen-model)")
}
