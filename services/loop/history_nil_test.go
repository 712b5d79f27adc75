package loop

import (
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// A transcript entry stored without a message (not written by the loop)
// must not crash the repair of the history around it.
func TestRepairHistorySkipsMissingMessages(t *testing.T) {
	got := RepairHistory([]*heraldpb.ChatMessage{{Role: "system", Content: "s"}, nil, {Role: "user", Content: "u"}, nil})
	require.Len(t, got, 2)
	require.Equal(t, "user", got[1].Role)
}
