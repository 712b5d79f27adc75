package accounting

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// billedAt is the gateway's table when the month's traffic ran: "m" at
// one price for the whole month, "my-model" with no price at all.
var billedAt = pricing.NewTable(map[string]pricing.Price{"m": {Input: 1, Output: 2, CacheRead: 0.1}})

var novemberStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// monthOfTraffic is November 2026 for three tenants, with the days around
// it: sessions with subagents (parent_session_id) and compression
// summaries, model "m" billed by billedAt and "my-model" unpriced. Each
// row is priced as the gateway prices it.
func monthOfTraffic(t *testing.T) (*heraldtest.Bus, string, *Service, []*heraldpb.UsageEvent) {
	b := heraldtest.StartBus(t)
	dsn := testDSN(t)
	svc := startService(t, b, testConfig(dsn))
	rng := rand.New(rand.NewPCG(11, 30))
	var evs []*heraldpb.UsageEvent
	for i := range 906 {
		// from Oct 30 to Dec 2: rows on both sides of the month
		ts := novemberStart.Add(-2*24*time.Hour + time.Duration(rng.Int64N(int64(34*24*time.Hour)))).Truncate(time.Second)
		if i >= 900 { // and some in the partial first hour of the --since window below
			ts = time.Date(2026, 11, 20, 10, 31+i-900, 0, 0, time.UTC)
		}
		tenant := []string{"acme", "globex", "initech"}[rng.IntN(3)]
		session := fmt.Sprintf("%s-s%d", tenant, rng.IntN(8))
		model := []string{"m", "m", "m", "my-model"}[rng.IntN(4)]
		e := usageEvent(fmt.Sprintf("nov-%d", i), tenant, session, model, ts, 100+rng.Int64N(5000), rng.Int64N(900), 0)
		switch rng.IntN(6) {
		case 0:
			e.ParentSessionId, e.SessionId, e.Purpose = session, session+"-child", "subagent"
		case 1:
			e.Purpose = "compression"
		}
		e.CostNanoUsd, e.PriceSource = billedAt.CostAt(model, ts, e.Usage, pricing.Charges{Served: true})
		evs = append(evs, e)
	}
	publishUsage(t, b.JS, "", evs...)
	waitDrained(t, b.JS, bus.StreamUsage)
	return b, dsn, svc, evs
}

// expected is what a tenant's rows of [from, to) cost under table, each
// priced by the entry in force at its time, counted here row by row.
func expected(evs []*heraldpb.UsageEvent, table pricing.Table, tenant string, from, to time.Time) uint64 {
	var sum uint64
	for _, e := range evs {
		ts := time.UnixMilli(e.TsUnixMs).UTC()
		if (tenant != "" && e.Tenant != tenant) || ts.Before(from) || !ts.Before(to) {
			continue
		}
		nano, src, err := table.RepriceAt(e.Model, ts, e.Usage, e.PriceSource)
		if err != nil || src == pricing.SourceUnknown {
			nano = e.CostNanoUsd
		}
		sum += nano
	}
	return sum
}

func datedPrices(t *testing.T, since string, input float64) pricing.Table {
	at, err := pricing.ParseSince(since)
	require.NoError(t, err)
	return pricing.NewTable(map[string]pricing.Price{
		"m": {Dated: []pricing.Price{{Input: 1, Output: 2, CacheRead: 0.1}, {Since: at, Input: input, Output: 3, CacheRead: 0.2}}},
		// priced late: from the beginning
		"my-model": {Input: 0.5, Output: 1},
	})
}

func TestRepricePricesEachRowByTheEntryInForceAtItsTime(t *testing.T) {
	_, dsn, _, evs := monthOfTraffic(t)
	ctx := context.Background()
	december := novemberStart.AddDate(0, 1, 0)
	now := december.Add(60 * time.Hour)
	st, err := openExisting(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()

	before, err := st.queryCost(ctx, CostQuery{Tenant: "acme", Month: "2026-11"}, now)
	require.NoError(t, err)
	require.Positive(t, before.Total.UnpricedCalls, "my-model's calls are unpriced")
	require.Equal(t, expected(evs, billedAt, "acme", novemberStart, december), before.Total.CostNanoUSD)

	// The price of m changed on November 15th; my-model got a price.
	changed := datedPrices(t, "2026-11-15", 2)
	dry, err := st.reprice(ctx, changed, RepriceQuery{DryRun: true}, now)
	require.NoError(t, err)
	require.Positive(t, dry.Corrected)
	require.Zero(t, scalar(t, dsn, "SELECT count() FROM usage_corrections"), "a dry run writes nothing")
	rep, err := st.reprice(ctx, changed, RepriceQuery{Reason: "test"}, now)
	require.NoError(t, err)
	var afterChange, unpriced uint64
	for _, e := range evs {
		if e.Model == "my-model" {
			unpriced++
		} else if !time.UnixMilli(e.TsUnixMs).Before(time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC)) {
			afterChange++
		}
	}
	require.Equal(t, uint64(len(evs)), rep.Rows)
	require.Equal(t, afterChange+unpriced, rep.Corrected, "rows before the change keep their price: they are not corrected")
	require.Equal(t, unpriced, rep.NowPriced)
	require.Equal(t, dry.Corrected, rep.Corrected, "the dry run said what the run did")
	require.Equal(t, dry.AfterNano, rep.AfterNano)
	require.Zero(t, scalar(t, dsn, "SELECT count() FROM usage_corrections WHERE model = 'm' AND ts < toDateTime('2026-11-15 00:00:00', 'UTC')"))
	require.Equal(t, afterChange, scalar(t, dsn, "SELECT count() FROM usage_corrections WHERE price_source_after = 'config;since=2026-11-15'"))
	require.Equal(t, uint64(len(evs)), scalar(t, dsn, "SELECT count() FROM usage_events"), "history is not rewritten")

	for _, tenant := range []string{"acme", "globex", "initech"} {
		got, err := st.queryCost(ctx, CostQuery{Tenant: tenant, Month: "2026-11", By: "day"}, now)
		require.NoError(t, err)
		require.Equal(t, expected(evs, changed, tenant, novemberStart, december), got.Total.CostNanoUSD, tenant)
		require.Zero(t, got.Total.UnpricedCalls, "repriced calls are priced")
	}
	// a --since window whose first hour is partial reads raw rows and
	// their corrections
	from := time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC)
	got, err := st.queryCost(ctx, CostQuery{Since: now.Sub(from)}, now)
	require.NoError(t, err)
	require.Equal(t, expected(evs, changed, "", from, now), got.Total.CostNanoUSD)

	// the audit trail names each row's correction
	audit, err := QueryCorrections(ctx, dsn, CorrectionsQuery{Model: "my-model"})
	require.NoError(t, err)
	require.Len(t, audit, int(unpriced))
	for _, c := range audit {
		require.Equal(t, uint32(1), c.Seq)
		require.Zero(t, c.CostBeforeNanoUSD)
		require.Equal(t, "unknown", c.PriceSourceBefore)
		require.Equal(t, "config", c.PriceSourceAfter)
		require.Positive(t, c.CostAfterNanoUSD)
		require.Equal(t, "test", c.Reason)
	}

	// Running it again changes nothing.
	corrections := scalar(t, dsn, "SELECT count() FROM usage_corrections")
	again, err := st.reprice(ctx, changed, RepriceQuery{}, now)
	require.NoError(t, err)
	require.Zero(t, again.Corrected)
	require.Equal(t, corrections, scalar(t, dsn, "SELECT count() FROM usage_corrections"))

	// A price corrected down: the difference is negative, and every view
	// still adds up to the nano-dollar.
	lower := datedPrices(t, "2026-11-15", 1.25)
	down, err := st.reprice(ctx, lower, RepriceQuery{Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Model: "m"}, now)
	require.NoError(t, err)
	require.Equal(t, afterChange, down.Corrected)
	require.Less(t, down.AfterNano, down.BeforeNano)
	require.Equal(t, afterChange, scalar(t, dsn, "SELECT count() FROM usage_corrections WHERE seq = 2"), "the second correction of a row follows its first")
	for _, tenant := range []string{"acme", "globex", "initech"} {
		got, err := st.queryCost(ctx, CostQuery{Tenant: tenant, Month: "2026-11", By: "session"}, now)
		require.NoError(t, err)
		require.Equal(t, expected(evs, lower, tenant, novemberStart, december), got.Total.CostNanoUSD, tenant)
	}
	got, err = st.queryCost(ctx, CostQuery{Since: now.Sub(from)}, now)
	require.NoError(t, err)
	require.Equal(t, expected(evs, lower, "", from, now), got.Total.CostNanoUSD)

	// Grafana's panels read the roll-ups: corrected too
	for _, tenant := range []string{"acme", "globex", "initech"} {
		want := float64(expected(evs, lower, tenant, novemberStart, december)) / 1e9
		require.InDelta(t, want, grafanaPanel(t, st, "spend_total", tenant), 1e-9, tenant)
		require.InDelta(t, want, grafanaPanel(t, st, "top_sessions", tenant), 1e-9, tenant)
	}

	// the session page shows each call at its corrected figure
	det, err := st.sessionDetail(ctx, "acme-s1")
	require.NoError(t, err)
	var steps uint64
	for _, s := range det.Steps {
		steps += s.CostNanoUSD
	}
	sess, err := st.queryCost(ctx, CostQuery{By: "session", Session: "acme-s1"}, now)
	require.NoError(t, err)
	require.Equal(t, sess.Total.CostNanoUSD, steps)
	require.Equal(t, sess.Total.CostNanoUSD, det.Total.CostNanoUSD)

	// insights read raw rows: corrected too
	in, err := QueryInsights(ctx, dsn, 0)
	require.NoError(t, err)
	var insight float64
	for _, m := range in.Models {
		insight += m.CostUSD
		require.Zero(t, m.UnpricedCalls, m.Model)
	}
	require.InDelta(t, float64(expected(evs, lower, "", time.Unix(0, 0), now.Add(time.Hour)))/1e9, insight, 1e-4)
}

func TestExportAddsUpToHeraldCostAndTheDashboard(t *testing.T) {
	_, dsn, svc, evs := monthOfTraffic(t)
	ctx := context.Background()
	prices := datedPrices(t, "2026-11-15", 2)
	_, err := Reprice(ctx, dsn, prices, RepriceQuery{Reason: "test"}, time.Now())
	require.NoError(t, err)
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	december := novemberStart.AddDate(0, 1, 0)

	for _, tenant := range []string{"acme", "globex", "initech"} {
		want := expected(evs, prices, tenant, novemberStart, december)
		cost, err := QueryCost(ctx, dsn, CostQuery{Tenant: tenant, Month: "2026-11"})
		require.NoError(t, err)
		require.Equal(t, want, cost.Total.CostNanoUSD, "herald cost --tenant %s --month 2026-11", tenant)
		// straight from the raw tables: each row at its latest correction
		require.Equal(t, want, scalar(t, dsn, `SELECT sum(if(has = 1, corrected, cost_nano_usd)) FROM usage_events
			ANY LEFT JOIN (SELECT event_id, argMax(cost_after_nano_usd, seq) AS corrected, toUInt8(1) AS has FROM usage_corrections GROUP BY event_id) USING event_id
			WHERE tenant = ? AND ts >= toDateTime('2026-11-01 00:00:00', 'UTC') AND ts < toDateTime('2026-12-01 00:00:00', 'UTC')`, tenant))
		for _, by := range ExportGroupings {
			rep, err := Export(ctx, dsn, ExportQuery{Tenant: tenant, Month: "2026-11", By: by})
			require.NoError(t, err)
			require.Equal(t, cost.Total, rep.Total, "%s by %s", tenant, by)
			var buf bytes.Buffer
			require.NoError(t, rep.WriteCSV(&buf))
			records, err := csv.NewReader(&buf).ReadAll()
			require.NoError(t, err)
			require.Equal(t, []string{by, "calls", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
				"reasoning_tokens", "cost_usd", "cost_nano_usd", "unpriced_calls"}, records[0])
			var nano, calls uint64
			for _, r := range records[1:] {
				n, err := strconv.ParseUint(r[9], 10, 64)
				require.NoError(t, err)
				require.Equal(t, exactUSD(n), r[8])
				nano += n
				c, _ := strconv.ParseUint(r[1], 10, 64)
				calls += c
			}
			require.Equal(t, want, nano, "the CSV adds up to the tenant's month, %s by %s", tenant, by)
			require.Equal(t, cost.Total.Calls, calls)
			if by == "session" {
				for _, r := range records[1:] {
					require.NotContains(t, r[0], "-child", "a subagent's usage is its parent session's")
				}
			}
		}
		var ov Overview
		getJSON(t, srv.URL+"/api/overview?tenant="+tenant+"&month=2026-11", &ov)
		require.Equal(t, want, ov.Total.CostNanoUSD, "the dashboard's month for %s", tenant)
	}

	dom := chromium(t, srv.URL+"/?tenant=globex&month=2026-11", filepath.Join(artifactsDir(t), "dashboard-month.png"))
	require.Equal(t, expected(evs, prices, "globex", novemberStart, december), nanoIn(t, dom, "total-cost"))
	require.Contains(t, dom, `<span id="month">2026-11</span>`)

	_, err = Export(ctx, dsn, ExportQuery{Tenant: "acme", Month: "November"})
	require.ErrorIs(t, err, ErrBadQuery)
	_, err = Export(ctx, dsn, ExportQuery{Month: "2026-11"})
	require.ErrorIs(t, err, ErrBadQuery)
}

// grafanaPanel runs a panel of deploy/grafana/herald-costs.json over
// November for one tenant, as the ClickHouse data source expands it, and
// adds up its cost_usd column: spend_total is the total cost panel,
// top_sessions the sessions table (which reads usage_by_session).
func grafanaPanel(t *testing.T, st *store, which, tenant string) float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "herald-costs.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Targets []struct {
				RawSQL string `json:"rawSql"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash))
	prefix := map[string]string{"spend_total": "SELECT sum(cost_nano_usd) / 1e9 AS cost_usd FROM usage_hourly",
		"top_sessions": "SELECT if(root_session_id = '', session_id, root_session_id) AS session"}[which]
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if !strings.HasPrefix(tg.RawSQL, prefix) {
				continue
			}
			sql := grafanaMacros.ReplaceAllString(tg.RawSQL, "$1 >= toDateTime('2026-11-01 00:00:00', 'UTC') AND $1 < toDateTime('2026-12-01 00:00:00', 'UTC')")
			sql = strings.ReplaceAll(strings.ReplaceAll(sql, "${tenant:regex}", tenant), " LIMIT 20", "")
			rows, err := st.conn.Query(context.Background(), "SELECT sum(cost_usd) FROM ("+sql+")")
			require.NoError(t, err, sql)
			defer rows.Close()
			require.True(t, rows.Next())
			var usd float64
			require.NoError(t, rows.Scan(&usd))
			return usd
		}
	}
	t.Fatalf("no %s panel", which)
	return 0
}
