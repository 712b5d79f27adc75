package accounting

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

func TestMigrateAppliesEachVersionOnce(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	applied, err := Migrate(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8}, applied)
	applied, err = Migrate(ctx, dsn)
	require.NoError(t, err)
	require.Empty(t, applied, "a second run has nothing to do")
	for _, table := range []string{"usage_events", "tool_events", "usage_event_ids", "tool_event_ids", "usage_hourly", "usage_by_session", "session_roots", "usage_unpriced", "usage_corrections", "tool_context_costs"} {
		require.Equal(t, uint64(1), scalar(t, dsn, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?", table), table)
	}
}

func TestMigrationsSplitIntoStatements(t *testing.T) {
	all, err := migrations()
	require.NoError(t, err)
	require.Len(t, all, 8)
	require.Len(t, all[0].statements, 2)
	for _, m := range all {
		for _, s := range m.statements {
			// A backfill (INSERT ... SELECT) is only allowed into a table
			// where a repeated row changes nothing (see 004).
			// An ALTER only adds a column, which Migrate takes as done
			// when it is already there (see 006).
			require.Regexp(t, `^(CREATE (TABLE|MATERIALIZED VIEW) IF NOT EXISTS |INSERT INTO (session_roots|usage_unpriced) |ALTER TABLE \w+ ADD COLUMN )`, s)
		}
	}
}

// syncBuffer is a log sink tests can read while the service writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAFillingUsageStreamIsWarnedAbout(t *testing.T) {
	b := heraldtest.StartBus(t)
	ctx := context.Background()
	stream, err := b.JS.Stream(ctx, bus.StreamUsage)
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	cfg.MaxBytes = 64 << 10
	_, err = b.JS.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	var logs syncBuffer
	acfg := Config{StreamCheckInterval: 20 * time.Millisecond}
	s, err := New(acfg, service.Deps{NC: b.NC, JS: b.JS, Log: zerolog.New(&logs)})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	defer s.Shutdown(ctx)

	for i := 0; ; i++ {
		e := manyEvents("fill", 1)[0]
		e.EventId += string(rune('a' + i%26))
		e.SessionId = string(bytes.Repeat([]byte("x"), 400))
		if err := bus.PublishProto(ctx, b.JS, bus.UsageSubject("acme"), "", e); err != nil {
			require.ErrorContains(t, err, "maximum bytes exceeded", "a full stream refuses new events")
			break
		}
		if i > 1000 {
			break
		}
	}
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "usage stream is filling up")
	}, 5*time.Second, 20*time.Millisecond)
	// One warning per threshold crossed (50, 80, 95 %), never one per check:
	// checks run every 20 ms, so a repeating warning would pile up here.
	require.Never(t, func() bool {
		return strings.Count(logs.String(), "usage stream is filling up") > 3
	}, 500*time.Millisecond, 20*time.Millisecond, "warned on every check")
}
