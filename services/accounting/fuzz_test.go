package accounting

import (
	"reflect"
	"testing"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/stretchr/testify/require"
)

// FuzzUsageEvent feeds arbitrary herald.usage.<tenant> payloads to the sink's
// decoder: garbage or an event without an id is a Permanent error (the
// sink dead-letters it), and an accepted event becomes one value in every
// column, whatever the numbers (negative tokens, huge latencies
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
	cols := k.toColumns([]row{r})
	require.Len(t, cols, len(k.columns))
	for i, col := range cols {
		require.Equal(t, 1, reflect.ValueOf(col).Len(), "column %s", k.columns[i])
	}
	require.Equal(t, []string{r.id}, cols[0])
}
