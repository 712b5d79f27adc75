package accounting

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// generatedUsage publishes n events spread over the last three days across
// tenants, sessions, models, providers and purposes, and waits for them.
func generatedUsage(t *testing.T, n int, now time.Time) (*heraldtest.Bus, string) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	startService(t, b, testConfig(dsn))
	rng := rand.New(rand.NewPCG(7, 7))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	evs := make([]*heraldpb.UsageEvent, n)
	for i := range evs {
		ts := now.Add(-time.Duration(rng.Int64N(int64(72 * time.Hour))))
		e := usageEvent(fmt.Sprintf("gen-%d", i), pick("acme", "globex", "initech"), fmt.Sprintf("s%d", rng.IntN(12)),
			pick("gpt-4o-mini", "gpt-4o", "claude-sonnet"), ts, rng.Int64N(5000), rng.Int64N(800), rng.Uint64N(5_000_000))
		e.Provider = pick("openai", "anthropic")
		e.Purpose = pick("agent", "compression", "subagent")
		if rng.IntN(10) == 0 {
			e.Status, e.ErrorClass = "error", "rate_limit"
		}
		evs[i] = e
	}
	publishUsage(t, b.JS, "", evs...)
	waitDrained(t, b.JS, bus.StreamUsage)
	require.Equal(t, uint64(n), scalar(t, dsn, "SELECT count() FROM usage_events"))
	return b, dsn
}

func TestQueryCostEqualsSumsOverRawRows(t *testing.T) {
	now := time.Now()
	_, dsn := generatedUsage(t, 3000, now)
	st, err := openExisting(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()

	rawKey := map[string]string{"model": "model", "provider": "provider", "session": "session_id",
		"tenant": "tenant", "purpose": "purpose", "day": "toString(toDate(ts, 'UTC'))"}
	for _, by := range CostGroupings {
		for _, q := range []CostQuery{
			{By: by},
			{By: by, Since: 24 * time.Hour},
			{By: by, Since: 90 * time.Minute, Tenant: "acme"},
			{By: by, Since: 48 * time.Hour, Session: "s3"},
		} {
			t.Run(fmt.Sprintf("%s/since=%s/tenant=%s/session=%s", by, q.Since, q.Tenant, q.Session), func(t *testing.T) {
				got, err := st.queryCost(context.Background(), q, now)
				require.NoError(t, err)
				want := rawCost(t, st, rawKey[by], q, now)
				require.Equal(t, want, got.Rows)
				var total uint64
				for _, r := range want {
					total += r.CostNanoUSD
				}
				require.Equal(t, total, got.Total.CostNanoUSD)
			})
		}
	}
}

// rawCost is the same question answered straight from usage_events.
func rawCost(t *testing.T, st *store, key string, q CostQuery, now time.Time) []CostRow {
	where, args := " WHERE 1", []any{}
	if q.Since > 0 {
		where += " AND ts >= toDateTime(?)"
		args = append(args, uint32(now.Add(-q.Since).Unix()))
	}
	if q.Tenant != "" {
		where, args = where+" AND tenant = ?", append(args, q.Tenant)
	}
	if q.Session != "" {
		where, args = where+" AND session_id = ?", append(args, q.Session)
	}
	rows, err := st.conn.Query(context.Background(), "SELECT "+key+" AS k, count(), countIf(status != 'ok'), sum(input_tokens), "+
		"sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(reasoning_tokens), sum(cost_nano_usd), "+
		"sum(toUInt64(latency_ms)) FROM usage_events"+where+" GROUP BY k", args...)
	require.NoError(t, err)
	defer rows.Close()
	out := []CostRow{}
	for rows.Next() {
		var r CostRow
		require.NoError(t, rows.Scan(&r.Key, &r.Calls, &r.Errors, &r.InputTokens, &r.OutputTokens,
			&r.CacheReadTokens, &r.CacheWriteTokens, &r.ReasoningTokens, &r.CostNanoUSD, &r.LatencyMs))
		r.CostUSD = nanoToUSD(r.CostNanoUSD)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CostNanoUSD != out[j].CostNanoUSD {
			return out[i].CostNanoUSD > out[j].CostNanoUSD
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func TestCostReportPrintsAsTableAndJSON(t *testing.T) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	startService(t, b, testConfig(dsn))
	now := time.Now()
	publishUsage(t, b.JS, "",
		usageEvent("a", "acme", "s1", "gpt-4o", now, 1000, 100, 2_500_000),
		usageEvent("b", "acme", "s1", "gpt-4o-mini", now, 2000, 300, 300_000),
		usageEvent("c", "acme", "s2", "gpt-4o-mini", now, 10, 1, 1_000))
	waitDrained(t, b.JS, bus.StreamUsage)

	rep, err := QueryCost(context.Background(), dsn, CostQuery{By: "model", Since: time.Hour})
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	lines := strings.Split(strings.TrimRight(table.String(), "\n"), "\n")
	require.Len(t, lines, 5, table.String())
	require.Contains(t, lines[0], "MODEL")
	require.Regexp(t, `^\s*gpt-4o\s+1\s+1000\s+100\s+500\s+3\s+25\s+0\.002500\s+0\s*$`, lines[1])
	require.Regexp(t, `^\s*gpt-4o-mini\s+2\s+2010\s+301\s+1005\s+6\s+75\s+0\.000301\s+0\s*$`, lines[2])
	require.Regexp(t, `^\s*total\s+3\s+3010\s+401\s+1505\s+9\s+100\s+0\.002801\s+0\s*$`, lines[4])

	data, err := json.Marshal(rep)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, "model", back["by"])
	require.InDelta(t, 0.002801, back["total"].(map[string]any)["cost_usd"], 1e-12)
	require.Len(t, back["rows"], 2)
}

func TestQueryCostSaysWhenClickHouseIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	_, err = QueryCost(context.Background(), "clickhouse://"+addr+"/herald", CostQuery{By: "model"})
	require.ErrorIs(t, err, ErrUnreachable)
	require.Contains(t, err.Error(), "ClickHouse at "+addr+" is not reachable")
	require.Contains(t, err.Error(), "usage events wait in the USAGE stream")

	_, err = QueryCost(context.Background(), "", CostQuery{})
	require.ErrorIs(t, err, ErrNoDSN)
	_, err = QueryCost(context.Background(), testServerDSN, CostQuery{By: "colour"})
	require.ErrorIs(t, err, ErrBadQuery)
	require.True(t, errors.Is(err, ErrBadQuery))
}

func TestNoDSNStartsAndLeavesEventsInTheStream(t *testing.T) {
	b := heraldtest.StartBus(t)
	startService(t, b, Config{})
	publishUsage(t, b.JS, "", usageEvent("waiting", "acme", "s1", "m", time.Now(), 1, 1, 1))
	_, err := b.JS.Consumer(context.Background(), bus.StreamUsage, usageKind.durable)
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound, "nothing consumes usage without ClickHouse")
	require.Equal(t, uint64(1), streamMessages(t, b.JS, bus.StreamUsage))
	_, err = QueryCost(context.Background(), "", CostQuery{})
	require.ErrorContains(t, err, "usage events wait in the USAGE stream")
}
