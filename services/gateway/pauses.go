package gateway

import (
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/nats-io/nats.go"
)

// A provider's 429 with Retry-After pauses it for every gateway, whatever
// herald.yaml says of its limits: the gateway that was refused publishes
// the pause on bus.ProvidersPaused (core NATS) and every other gateway holds
// its own calls to the provider (adaptive.go) until it ends. Without it, N
// gateways each asked a provider that had just said "too many" again (a
// retry storm across processes). A provider with shared limits (limits.go)
// also keeps the pause in its record, for a gateway that starts during it;
// an unlimited one costs nothing more on the happy path: no read or write
// of shared state per call, one message per 429.
//
// A pause is sent as its length, not its end, so the gateways' clocks need
// not agree; it is capped at maxPause. Only the gateway NATS user may
// publish on the subject (deploy/nats/herald.conf): anyone who could would
// hold every model call for up to maxPause.

// pauseNotice is a pause on bus.ProvidersPaused.
type pauseNotice struct {
	Provider string `json:"provider"`
	PauseMS  int64  `json:"pause_ms"`
	// Gateway is the sender's id: a gateway paused itself already.
	Gateway string `json:"gateway"`
}

// listen subscribes to the pauses other gateways announce.
func (g *gates) listen(nc *nats.Conn) (*nats.Subscription, error) {
	g.mu.Lock()
	g.nc, g.id = nc, rand.Text()
	g.mu.Unlock()
	return nc.Subscribe(bus.ProvidersPaused, g.onPause)
}

// announcePause tells every other gateway that provider asked for d.
func (g *gates) announcePause(provider string, d time.Duration) {
	g.mu.Lock()
	nc, id := g.nc, g.id
	g.mu.Unlock()
	if nc == nil {
		return
	}
	data, err := json.Marshal(pauseNotice{Provider: provider, PauseMS: min(d, maxPause).Milliseconds(), Gateway: id})
	if err == nil {
		err = nc.Publish(bus.ProvidersPaused, data)
	}
	if err != nil {
		g.log.Warn().Err(err).Str("provider", provider).Msg("provider's pause not announced to the other gateways")
	}
}

// onPause holds this gateway's calls to a provider another gateway was
// told to leave alone.
func (g *gates) onPause(m *nats.Msg) {
	var n pauseNotice
	if json.Unmarshal(m.Data, &n) != nil || n.PauseMS <= 0 || n.Provider == "" || len(n.Provider) > 256 {
		return
	}
	g.mu.Lock()
	self := n.Gateway == g.id
	g.mu.Unlock()
	if self {
		return
	}
	d := min(time.Duration(n.PauseMS)*time.Millisecond, maxPause)
	g.of(n.Provider).adaptive.pauseUntil(time.Now().Add(d))
	g.log.Info().Str("provider", n.Provider).Dur("pause", d).Msg("another gateway was asked to pause the provider; holding calls to it")
}
