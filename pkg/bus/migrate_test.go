package bus_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// legacySessions is SESSIONS as releases before the internal namespace
// declared it: transcripts under herald.session.<sid>.log.
func legacySessions() jetstream.StreamConfig {
	for _, cfg := range bus.Streams(1) {
		if cfg.Name == bus.StreamSessions {
			cfg.Subjects = slices.Clone(cfg.Subjects)
			cfg.Subjects[slices.Index(cfg.Subjects, bus.SessionLogFilter)] = bus.LegacySessionLogFilter
			return cfg
		}
	}
	panic("no SESSIONS")
}

// An old store's transcripts move to the internal namespace on the next
// start, in their order, headers kept, results left where they are; a
// second start has nothing to move.
func TestEnsureMovesTranscriptsOutOfThePublicNamespace(t *testing.T) {
	b := heraldtest.StartEmptyBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.JS.CreateStream(ctx, legacySessions())
	require.NoError(t, err)
	for i := range 6 {
		sid := []string{"s-a", "s-b"}[i%2]
		m := nats.NewMsg("herald.session." + sid + ".log")
		m.Data = fmt.Appendf(nil, "%s entry %d", sid, i/2)
		m.Header.Set("Herald-Test", fmt.Sprint(i))
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("log:%s:%d", sid, i/2))
		_, err := b.JS.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	_, err = b.JS.Publish(ctx, bus.SessionResult("s-a"), []byte(`{"session_id":"s-a"}`))
	require.NoError(t, err)

	changes, err := bus.Declare(ctx, b.JS, 1)
	require.NoError(t, err)
	require.Contains(t, changes, bus.Change{Stream: bus.StreamSessions, Action: "migrated",
		Reason: "6 transcript entries moved from herald.session.*.log to herald.internal.session.*.log"})

	stream, err := b.JS.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.NotContains(t, info.Config.Subjects, bus.LegacySessionLogFilter)
	require.Contains(t, info.Config.Subjects, bus.SessionLogFilter)
	require.Equal(t, uint64(7), info.State.Msgs, "every entry moved once, the result kept")
	for _, sid := range []string{"s-a", "s-b"} {
		var got []string
		for seq := uint64(1); ; {
			raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(bus.SessionLog(sid)))
			if err != nil {
				require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
				break
			}
			seq = raw.Sequence + 1
			got = append(got, string(raw.Data))
			require.NotEmpty(t, raw.Header.Get("Herald-Test"), "headers (a claim's name among them) travel with the entry")
			require.NotEmpty(t, raw.Header.Get(bus.HeaderMigratedFrom))
		}
		require.Equal(t, []string{sid + " entry 0", sid + " entry 1", sid + " entry 2"}, got)
	}
	_, err = stream.GetLastMsgForSubject(ctx, "herald.session.s-a.log")
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound, "nothing is left under the public subject")
	_, err = stream.GetLastMsgForSubject(ctx, bus.SessionResult("s-a"))
	require.NoError(t, err, "results stay where they are")

	changes, err = bus.Declare(ctx, b.JS, 1)
	require.NoError(t, err)
	require.Empty(t, changes, "a second start has nothing to move or change")
}

// A start stopped half-way (the new subject added, some entries moved)
// leaves the old subject declared, so the next start moves the rest.
func TestAnInterruptedMoveFinishesOnTheNextStart(t *testing.T) {
	b := heraldtest.StartEmptyBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := legacySessions()
	cfg.Subjects = append(cfg.Subjects, bus.SessionLogFilter) // the first step of a move
	_, err := b.JS.CreateStream(ctx, cfg)
	require.NoError(t, err)
	_, err = b.JS.Publish(ctx, bus.SessionLog("s-a"), []byte("moved before the stop"))
	require.NoError(t, err)
	_, err = b.JS.Publish(ctx, "herald.session.s-a.log", []byte("left behind"))
	require.NoError(t, err)

	require.NoError(t, bus.Ensure(ctx, b.JS, 1))
	stream, err := b.JS.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(bus.SessionLog("s-a")))
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Subjects[bus.SessionLog("s-a")])
	require.NotContains(t, info.Config.Subjects, bus.LegacySessionLogFilter)
}
