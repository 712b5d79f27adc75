package bus_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

func declarationCount() int {
	return len(bus.Streams(1)) + len(bus.Buckets(1)) + len(bus.ObjectStores(1))
}

// Declare creates everything once, leaves a server that is in shape
// alone, and repairs (and names) a stream whose settings drifted.
func TestDeclareWritesOnlyWhatIsMissingOrDiffers(t *testing.T) {
	js := heraldtest.StartEmptyBus(t).JS
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	changes, err := bus.Declare(ctx, js, 1)
	require.NoError(t, err)
	require.Len(t, changes, declarationCount())
	for _, ch := range changes {
		require.Equal(t, "created", ch.Action, ch.Stream)
	}

	changes, err = bus.Declare(ctx, js, 1)
	require.NoError(t, err)
	require.Empty(t, changes, "a server already in shape is not written to")

	events, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	cfg := events.CachedInfo().Config
	cfg.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	changes, err = bus.Declare(ctx, js, 1)
	require.NoError(t, err)
	require.Len(t, changes, 1)
	require.Equal(t, bus.StreamEvents, changes[0].Stream)
	require.Equal(t, "updated", changes[0].Action)
	require.Contains(t, changes[0].Reason, "max age 1h0m0s")
	info, err := events.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, info.Config.MaxAge)

	// A session bucket made to republish its state elsewhere is noticed,
	// reported by Check and put back by Declare.
	kv, err := js.Stream(ctx, "KV_"+bus.BucketSessions)
	require.NoError(t, err)
	kcfg := kv.CachedInfo().Config
	kcfg.RePublish = &jetstream.RePublish{Source: ">", Destination: "leak.>"}
	_, err = js.UpdateStream(ctx, kcfg)
	require.NoError(t, err)
	err = bus.Check(ctx, js, 1)
	require.ErrorIs(t, err, bus.ErrNotDeclared)
	require.ErrorContains(t, err, "KV_herald_sessions is out of date (republishes > to leak.>)")
	changes, err = bus.Declare(ctx, js, 1)
	require.NoError(t, err)
	require.Equal(t, []bus.Change{{Stream: "KV_herald_sessions", Action: "updated", Reason: "republishes > to leak.>"}}, changes)
	kinfo, err := kv.Info(ctx)
	require.NoError(t, err)
	require.Nil(t, kinfo.Config.RePublish)
}

// A process configured with another replica count than the streams have
// (the default of one, against a cluster's three) neither fails its check
// nor changes them; only Declare (herald declare) sets replica counts.
func TestOnlyDeclareChangesReplicaCounts(t *testing.T) {
	js := heraldtest.StartEmptyBus(t).JS
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := bus.Declare(ctx, js, 1)
	require.NoError(t, err)

	require.NoError(t, bus.Check(ctx, js, 3))
	require.NoError(t, bus.Ensure(ctx, js, 3), "ensure leaves existing replica counts alone")
	_, err = bus.Declare(ctx, js, 3)
	require.Error(t, err, "a single server cannot hold three replicas")
	require.NotErrorIs(t, err, bus.ErrNotDeclared, "the server's answer, not a permission problem")
	require.ErrorContains(t, err, "replicas 1, want 3")
}

// A service user that may list streams but not create or update them
// starts against a declared server, and is told what to do on an
// undeclared one instead of waiting silently.
func TestEnsureNeedsNoRightToChangeStreams(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`
accounts {
  A {
    jetstream: enabled
    users = [
      { user: admin, password: admin }
      { user: svc, password: svc, permissions {
          publish: { allow: ["$JS.API.INFO", "$JS.API.STREAM.LIST"] }
          subscribe: { allow: ["_INBOX.>"] }
      } }
    ]
  }
}
`), 0o600))
	srv, err := embedded.Start(embedded.Options{StoreDir: t.TempDir(), ConfigFile: conf, Log: zerolog.Nop()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	connect := func(user string) jetstream.JetStream {
		nc, err := srv.Connect(user, nats.UserInfo(user, user))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		return js
	}
	svc, admin := connect("svc"), connect("admin")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err = bus.Check(ctx, svc, 1)
	cancel()
	require.ErrorIs(t, err, bus.ErrNotDeclared, "checking needs no more than listing")
	require.ErrorContains(t, err, "stream "+bus.StreamTasks+" is missing")

	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	err = bus.Ensure(ctx, svc, 1)
	cancel()
	require.ErrorIs(t, err, bus.ErrNotDeclared)
	require.ErrorContains(t, err, "stream "+bus.StreamTasks+" is missing and this user may not declare it")
	require.ErrorContains(t, err, "permissions violation")
	require.ErrorContains(t, err, "herald declare")

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = bus.Declare(ctx, admin, 1)
	require.NoError(t, err)
	require.NoError(t, bus.Check(ctx, svc, 1))
	require.NoError(t, bus.Ensure(ctx, svc, 1))
}

// A client that only submits work needs the streams a task travels on to
// exist, whatever their settings: one declared by another Herald version
// will do, an undeclared server will not.
func TestCheckExistsIgnoresSettings(t *testing.T) {
	js := heraldtest.StartEmptyBus(t).JS
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := []string{bus.StreamTasks, bus.StreamSessions, bus.StreamEvents, bus.StreamControl}
	require.ErrorIs(t, bus.CheckExists(ctx, js, client...), bus.ErrNotDeclared)

	_, err := bus.Declare(ctx, js, 1)
	require.NoError(t, err)
	events, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	cfg := events.CachedInfo().Config
	cfg.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	require.ErrorIs(t, bus.Check(ctx, js, 1), bus.ErrNotDeclared, "a service notices the difference")
	require.NoError(t, bus.CheckExists(ctx, js, client...), "a client does not mind it")
}
