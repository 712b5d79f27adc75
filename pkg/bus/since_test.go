package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestFirstOnSubjectSinceFindsTheFirstStoredFromThen(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	a, other := bus.ToolResult("s1", "a"), bus.ToolResult("s1", "b")
	var marks []time.Time // marks[i]: a moment after a's message i was stored, before i+1
	for i := range 40 {
		require.NoError(t, bus.Publish(ctx, b.JS, a, "", fmt.Appendf(nil, "a%d", i)))
		for j := range i % 3 {
			require.NoError(t, bus.Publish(ctx, b.JS, other, "", fmt.Appendf(nil, "b%d-%d", i, j)))
		}
		require.Eventually(t, func() bool { return time.Now().After(storedAt(t, b, a).Add(time.Millisecond)) }, time.Second, time.Millisecond)
		marks = append(marks, time.Now())
	}
	last, err := bus.LastOnSubject(ctx, b.JS, bus.StreamToolResults, a)
	require.NoError(t, err)
	for i, mark := range marks[:len(marks)-1] {
		m, err := bus.FirstOnSubjectSince(ctx, b.JS, bus.StreamToolResults, a, mark, last.Sequence)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("a%d", i+1), string(m.Data))
	}
	m, err := bus.FirstOnSubjectSince(ctx, b.JS, bus.StreamToolResults, a, time.Time{}, last.Sequence)
	require.NoError(t, err)
	require.Equal(t, "a0", string(m.Data), "from the beginning")
	_, err = bus.FirstOnSubjectSince(ctx, b.JS, bus.StreamToolResults, a, marks[len(marks)-1], last.Sequence)
	require.True(t, errors.Is(err, jetstream.ErrMsgNotFound), "nothing stored since: %v", err)
	_, err = bus.FirstOnSubjectSince(ctx, b.JS, bus.StreamToolResults, bus.ToolResult("s1", "none"), time.Time{}, last.Sequence)
	require.True(t, errors.Is(err, jetstream.ErrMsgNotFound), "a subject with nothing on it: %v", err)
}

// storedAt is when the last message on subject was stored.
func storedAt(t *testing.T, b *heraldtest.Bus, subject string) time.Time {
	m, err := bus.LastOnSubject(context.Background(), b.JS, bus.StreamToolResults, subject)
	require.NoError(t, err)
	return m.Time
}
