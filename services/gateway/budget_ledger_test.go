package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// Days and months are those of budgets.timezone: 23:30 UTC on the last day
// of November is already December 1st in Paris.
func TestWindowsFollowTheConfiguredZone(t *testing.T) {
	b := config.Budgets{Tenants: map[string]config.BudgetLimits{"acme": {Total: 9, Daily: 1, Monthly: 5}},
		Keys: map[string]config.BudgetLimits{"key_a": {Daily: 2}}, Timezone: "Europe/Paris"}
	loc, err := b.Location()
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 23, 30, 0, 0, time.UTC)
	got := BudgetWindows(b, loc, "acme", "key_a", "sch_unbudgeted", at)
	require.Equal(t, []BudgetWindow{
		{Scope: "tenant", ID: "acme", Name: "total", Period: "all", Limit: 9},
		{Scope: "tenant", ID: "acme", Name: "daily", Period: "2026-12-01", Limit: 1},
		{Scope: "tenant", ID: "acme", Name: "monthly", Period: "2026-12", Limit: 5},
		{Scope: "key", ID: "key_a", Name: "daily", Period: "2026-12-01", Limit: 2},
	}, got)
	require.Equal(t, "acme", got[0].Key(), "a tenant's total keeps Herald's earlier key")
	require.Equal(t, "tenant.acme.daily.2026-12-01", got[1].Key())
	utc := BudgetWindows(config.Budgets{Tenants: b.Tenants}, time.UTC, "acme", "", "", at)
	require.Equal(t, "2026-11-30", utc[1].Period)
	require.Empty(t, BudgetWindows(b, loc, "globex", "", "", at), "no entry and no default_tenant: no window")
}

// A hold whose gateway died lapses: calls wait for it only until its time
// is up, then the window is theirs again; a settled hold adds its real cost.
func TestAHoldLapsesAndASettledHoldCountsItsCost(t *testing.T) {
	b := heraldtest.StartBus(t)
	s := &spendLedgers{kv: bus.NewLazyBucket(b.JS, bus.BucketSpend), log: heraldtest.Logger(t)}
	clock := newTestClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	w := []BudgetWindow{{Scope: "tenant", ID: "acme", Name: "daily", Period: "2026-12-03", Limit: 1}}
	ctx := context.Background()

	refused, err := s.reserve(ctx, w, "dead-gateway", 2e9, clock.Now().Add(time.Minute), clock.Now)
	require.NoError(t, err)
	require.Nil(t, refused, "nothing spent yet: the call may go")

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.reserve(short, w, "next", 1e8, clock.Now().Add(time.Minute), clock.Now)
	cancel()
	require.ErrorContains(t, err, "waiting for the calls in flight that hold the rest of the tenant \"acme\" daily window")

	clock.Add(2 * time.Minute)
	refused, err = s.reserve(ctx, w, "next", 1e8, clock.Now().Add(time.Minute), clock.Now)
	require.NoError(t, err)
	require.Nil(t, refused, "the dead gateway's hold lapsed")
	l := s.settle(ctx, w, "next", 3e8)
	require.Equal(t, uint64(3e8), l[0].SpentNano)
	require.Empty(t, l[0].Held)

	kv, err := b.JS.KeyValue(ctx, bus.BucketSpend)
	require.NoError(t, err)
	e, err := kv.Get(ctx, w[0].Key())
	require.NoError(t, err)
	require.Equal(t, "300000000", string(e.Value()), "a ledger holding nothing is the plain decimal")

	s.settle(ctx, w, "next", 8e8)
	refused, err = s.reserve(ctx, w, "after", 1, clock.Now().Add(time.Minute), clock.Now)
	require.NoError(t, err)
	require.NotNil(t, refused, "$1.10 of $1 spent: refused")
	require.Equal(t, uint64(11e8), refused.SpentNano)

	_, err = kv.Put(ctx, w[0].Key(), []byte("garbage"))
	require.NoError(t, err)
	_, err = s.reserve(ctx, w, "x", 1, clock.Now().Add(time.Minute), clock.Now)
	require.ErrorContains(t, err, `not a spend ledger: "garbage"`, "a garbled ledger is an error, never a reset to zero")
}
