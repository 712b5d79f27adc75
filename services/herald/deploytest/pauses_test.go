package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/stretchr/testify/require"
)

// TestOnlyGatewaysAnnounceAProvidersPause: a pause on
// herald.providers.paused holds every gateway's calls to a provider for up
// to two minutes, so only the gateway user may publish one; a gateway
// hears another's. Every other user, tenants and plugins included, is
// refused.
func TestOnlyGatewaysAnnounceAProvidersPause(t *testing.T) {
	s := startSecured(t)
	gw, other := s.connect(t, "gateway"), s.connect(t, "gateway")
	sub, err := other.nc.SubscribeSync(bus.ProvidersPaused)
	require.NoError(t, err)
	require.NoError(t, other.nc.Flush())
	require.NoError(t, gw.nc.Publish(bus.ProvidersPaused, []byte(`{"provider":"openai","pause_ms":1000,"gateway":"a"}`)))
	m, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err, "one gateway hears another's pause")
	require.Contains(t, string(m.Data), "openai")

	users := usersBut("gateway")
	for _, u := range users {
		c := s.connect(t, u)
		require.NoError(t, c.nc.Publish(bus.ProvidersPaused, []byte(`{"provider":"openai","pause_ms":120000,"gateway":"x"}`)))
		c.requireDenied("publish", bus.ProvidersPaused)
	}
}

// TestOnlyTheLoopAndTheGatewayCountHandBacks: the loop and the gateway
// count the hand-backs of their waiting messages in herald_returns (a
// count lowers a message's failures, so a writer could keep a failing
// message going); no other user, tenants and clients included, may write
// there.
func TestOnlyTheLoopAndTheGatewayCountHandBacks(t *testing.T) {
	s := startSecured(t)
	s.declared(t)
	for _, u := range []string{"loop", "gateway"} {
		c := s.connect(t, u)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kv, err := c.js.KeyValue(ctx, bus.BucketReturns)
		require.NoError(t, err, u)
		_, err = kv.Create(ctx, "returned.TASKS.loop-tasks."+u, []byte("1"))
		require.NoError(t, err, "%s counts a hand-back", u)
		e, err := kv.Get(ctx, "returned.TASKS.loop-tasks."+u)
		require.NoError(t, err, "%s reads a count", u)
		require.Equal(t, "1", string(e.Value()))
		cancel()
	}
	users := usersBut("gateway", "loop")
	for _, u := range users {
		c := s.connect(t, u)
		subj := "$KV." + bus.BucketReturns + ".returned.TASKS.loop-tasks.1"
		require.NoError(t, c.nc.Publish(subj, []byte("0")))
		c.requireDenied("publish", subj)
	}
}
