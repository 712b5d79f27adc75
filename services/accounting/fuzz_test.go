package accounting

import (
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/stretchr/testify/require"
)

// FuzzUsageEvent feeds arbitrary herald.usage.<tenant> payloads to the sink's
// decoder: garbage or an event without an id is a Permanent error (the
// worker dead-letters it), and an accepted event becomes a row with one
// value per column, whatever the numbers (negative tokens, huge latencies
// and attempts are clamped to the column types).
// Seeds: testdata/fuzz/FuzzUsageEvent.
func FuzzUsageEvent(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { checkRow(t, usageKind, data) })
}

// FuzzToolEvent does the same for herald.toolevents.<tenant>.
// Seeds: testdata/fuzz/FuzzToolEvent.
func FuzzToolEvent(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { checkRow(t, toolKind, data) })
}

func checkRow(t *testing.T, k eventKind, data []byte) {
	r, err := k.decode(data)
	if err != nil {
		require.True(t, bus.IsPermanent(err), "%v", err)
		return
	}
	require.NotEmpty(t, r.id)
	require.Len(t, r.values, len(k.columns))
	require.Equal(t, r.id, r.values[0])
}
