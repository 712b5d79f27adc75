package loop

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// Two transitions from one state revision may both publish an entry at the
// same index before their compare-and-set; only one commits. Whatever order
// the two writes reached the stream in, and whatever comes after, the
// transcript read back is the committed one.
func TestTranscriptKeepsTheCommittedEntryOverALosersWrite(t *testing.T) {
	js := heraldtest.StartBus(t).JS
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := newTranscripts(js)
	write := func(from int, prev uint64, msgs ...*heraldpb.ChatMessage) uint64 {
		b := bus.NewBatch(js)
		chain := tr.append(ctx, b, chainNext, "s1", "acme", 1, from, prev, msgs...)
		require.NoError(t, b.Wait(ctx))
		return chain
	}
	msg := func(role, content string) *heraldpb.ChatMessage {
		return &heraldpb.ChatMessage{Role: role, Content: content}
	}
	read := func(n int, chain uint64) []string {
		msgs, err := ReadTranscript(ctx, js, "s1", n, chain)
		require.NoError(t, err)
		var out []string
		for _, m := range msgs {
			out = append(out, m.Content)
		}
		return out
	}

	base := write(0, 0, msg("system", "sys"), msg("user", "hello"))

	// The winner writes first, the loser (an interrupt racing the model's
	// answer, say) after it: latest-write-wins would pick the loser.
	won := write(2, base, msg("assistant", "the answer"))
	write(2, base, msg("assistant", "interrupted"))
	require.Equal(t, []string{"sys", "hello", "the answer"}, read(3, won))

	// The loser writes first and the winner's entry at that index is a
	// different message: it is stored too (its id differs), not dropped as a
	// duplicate of the loser's.
	write(3, won, msg("user", "orphan from a lost race"))
	next := write(3, won, msg("user", "the next question"))
	require.Equal(t, []string{"sys", "hello", "the answer", "the next question"}, read(4, next))

	// A retry of the same append is stored once.
	stored := func() uint64 {
		st, err := js.Stream(ctx, bus.StreamSessions)
		require.NoError(t, err)
		info, err := st.Info(ctx)
		require.NoError(t, err)
		return info.State.Msgs
	}
	before := stored()
	require.Equal(t, next, write(3, won, msg("user", "the next question")))
	require.Equal(t, before, stored())
	require.Equal(t, []string{"sys", "hello", "the answer", "the next question"}, read(4, next))
}
