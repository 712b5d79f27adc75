package deploytest

import (
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

	users := append([]string{"client", "plugins", "api"}, tenantUsers...)
	for _, u := range serviceUsers {
		if u != "gateway" {
			users = append(users, u)
		}
	}
	for _, u := range users {
		c := s.connect(t, u)
		require.NoError(t, c.nc.Publish(bus.ProvidersPaused, []byte(`{"provider":"openai","pause_ms":120000,"gateway":"x"}`)))
		c.requireDenied("publish", bus.ProvidersPaused)
	}
}
