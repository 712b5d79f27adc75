package memory

import (
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// Hermes' session_search cases that apply to Herald's smaller tool
// ({query?, limit?}; tests/tools/test_session_search.py, HERMES-TESTS.md §14),
// through the bus over stored transcripts.
func TestParitySessionSearchLimitsAndShapes(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, testConfig(t), "mem-1")
	for i := range 12 {
		transcript(t, b, fmt.Sprintf("past-%02d", i), conversation(fmt.Sprintf("widget number %d", i))...)
	}
	n := 0
	run := func(args map[string]any) outcome {
		n++
		return search(t, b, "now", fmt.Sprintf("p%d-%d", n, time.Now().UnixNano()), args)
	}
	require.Eventually(t, func() bool { return len(run(map[string]any{"query": "widget", "limit": 10}).Results) == 10 },
		10*time.Second, 50*time.Millisecond, "the index has read the transcripts")

	cases := []struct {
		name string
		args map[string]any
		want int
	}{
		{"limit defaults to 3", map[string]any{"query": "widget"}, 3},
		{"limit is capped at 10", map[string]any{"query": "widget", "limit": 50}, 10},
		{"limit 1", map[string]any{"query": "widget", "limit": 1}, 1},
		{"no query browses recent sessions", map[string]any{}, 3},
		{"a blank query browses too", map[string]any{"query": "   "}, 3},
		{"no hits is a success with no results", map[string]any{"query": "zebra"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := run(tc.args)
			require.True(t, o.Success)
			require.Len(t, o.Results, tc.want)
			for _, h := range o.Results {
				require.NotEqual(t, "now", h.SessionID, "the calling session is never a result")
			}
		})
	}
	// Herald differs: a limit that is not an integer is an error naming the
	// expected shape (Hermes falls back to 3).
	res := call(t, b, "now", "bad-limit", "t", "session_search", map[string]any{"query": "widget", "limit": "many"})
	require.True(t, res.IsError)
	require.Contains(t, decodeOutcome(t, res).Error, "limit")
}
