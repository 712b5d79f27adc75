package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every request that follows a run's events reads them with its own
// consumer on EVENTS; a finished request deletes it at once. Left to its
// inactivity threshold, a busy api piled up thousands and was then refused
// new ones by the server ("maximum consumers limit reached": 503s under
// BenchmarkSustained).
func TestFinishedRequestsLeaveNoConsumerOnEvents(t *testing.T) {
	h := startHerald(t, "")
	for range 10 {
		var out struct {
			Status string `json:"status"`
		}
		r := call(t, "POST", h.URL+"/v1/responses", "", map[string]any{"model": "herald", "input": "say: ok"}, &out)
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.Equal(t, "completed", out.Status)
	}
	rc := startRun(t, h, "", map[string]any{"prompt": "say: streamed"})
	resp, err := http.Get(h.URL + "/v1/runs/" + rc.RunID + "/events")
	require.NoError(t, err)
	require.NoError(t, readSSE(resp.Body, func(ev sseEvent) bool { return ev.Event != "result" }))
	resp.Body.Close()

	js := h.js(t)
	require.Eventually(t, func() bool {
		s, err := js.Stream(ctxT(t, 5*time.Second), "EVENTS")
		if err != nil {
			return false
		}
		info, err := s.Info(ctxT(t, 5*time.Second))
		return err == nil && info.State.Consumers == 0
	}, 15*time.Second, 50*time.Millisecond, "the requests' consumers on EVENTS are gone")
}
