package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestLastBySubscriptionReadsTheLastMessageAndLeavesNoConsumer(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := bus.LastBySubscription(ctx, b.JS, bus.StreamSessions, bus.SessionResult("s1"))
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
	for _, n := range []int{1, 2} {
		require.NoError(t, bus.PublishJSON(ctx, b.JS, bus.SessionResult("s1"), "", map[string]int{"n": n}))
	}
	require.NoError(t, bus.PublishJSON(ctx, b.JS, bus.SessionResult("s2"), "", map[string]int{"n": 3}))
	raw, err := bus.LastBySubscription(ctx, b.JS, bus.StreamSessions, bus.SessionResult("s1"))
	require.NoError(t, err)
	require.Equal(t, bus.SessionResult("s1"), raw.Subject)
	require.JSONEq(t, `{"n":2}`, string(raw.Data))
	stream, err := b.JS.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers, "the replay consumer is deleted after the read")
}
