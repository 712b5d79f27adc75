// Package heraldtest starts the real pieces tests need: an in-process
// JetStream server with Herald's streams declared, and helpers to wait for
// asynchronous outcomes without sleeping.
package heraldtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// Bus is a running in-process JetStream with Herald's streams.
type Bus struct {
	Server *embedded.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
}

// StartBus starts an embedded JetStream server with a file store in a
// temporary folder and declares every stream; it is stopped with the test.
func StartBus(t testing.TB) *Bus {
	t.Helper()
	b := StartEmptyBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, b.JS, 1))
	return b
}

// StartEmptyBus is StartBus without Herald's streams.
func StartEmptyBus(t testing.TB) *Bus {
	t.Helper()
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect("test")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return &Bus{Server: srv, NC: nc, JS: js}
}

// Connect opens another client connection (as another process would).
func (b *Bus) Connect(t testing.TB, name string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := b.Server.Connect(name)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// Logger returns a logger that writes into the test's output, at the level
// HERALD_TEST_LOG names (default info).
func Logger(t testing.TB) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(os.Getenv("HERALD_TEST_LOG"))
	if err != nil || lvl == zerolog.NoLevel {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(lvl).With().Timestamp().Logger()
}

// DeadLetters returns the dead letters stored for stream so far.
func DeadLetters(t testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.StreamDLQ)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if m.Subject == bus.DeadLetterSubject(stream) {
			out = append(out, m)
		}
	}
	return out
}
