package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/nats-io/nats.go/jetstream"
)

// BudgetStatus is one window's standing: what `herald budgets` and the
// dashboard show.
type BudgetStatus struct {
	Scope    string  `json:"scope"`
	ID       string  `json:"id"`
	Window   string  `json:"window"`
	Period   string  `json:"period"`
	SpentUSD float64 `json:"spent_usd"`
	// HeldUSD is reserved by calls in flight.
	HeldUSD  float64 `json:"held_usd"`
	LimitUSD float64 `json:"limit_usd"`
	Percent  float64 `json:"percent"`
	// Alerted are the thresholds already alerted in this period.
	Alerted []float64 `json:"alerted"`
	// Default: the tenant has no entry of its own; budgets.default_tenant caps it.
	Default bool `json:"default,omitempty"`
}

// BudgetReport reads every configured window's current period at now: each
// tenant, key and schedule of budgets, and each tenant budgets.default_tenant
// caps that has spent in the current day or month.
func BudgetReport(ctx context.Context, js jetstream.JetStream, b config.Budgets, now time.Time) ([]BudgetStatus, error) {
	loc, err := b.Location()
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, bus.BucketSpend)
	if err != nil {
		return nil, fmt.Errorf("spend bucket: %w", err)
	}
	now = now.In(loc)
	var windows []BudgetWindow
	defaults := map[string]bool{}
	for _, m := range []struct {
		scope   string
		entries map[string]config.BudgetLimits
	}{{ScopeTenant, b.Tenants}, {ScopeKey, b.Keys}, {ScopeSchedule, b.Schedules}} {
		ids := make([]string, 0, len(m.entries))
		for id := range m.entries {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			windows = append(windows, windowsOf(m.scope, id, m.entries[id], now)...)
		}
	}
	if b.DefaultTenant.Any() {
		tenants, err := spendingTenants(ctx, kv, now)
		if err != nil {
			return nil, err
		}
		for _, t := range tenants {
			if _, own := b.Tenants[t]; !own {
				defaults[t] = true
				windows = append(windows, windowsOf(ScopeTenant, t, b.DefaultTenant, now)...)
			}
		}
	}
	thresholds := append(b.Thresholds(), 100)
	slices.Sort(thresholds)
	thresholds = slices.Compact(thresholds)
	out := make([]BudgetStatus, 0, len(windows))
	for _, w := range windows {
		st := BudgetStatus{Scope: w.Scope, ID: w.ID, Window: w.Name, Period: w.Period, LimitUSD: w.Limit, Alerted: []float64{},
			Default: w.Scope == ScopeTenant && defaults[w.ID]}
		e, err := kv.Get(ctx, w.Key())
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("read the spend of the %s: %w", w, err)
		default:
			l, err := ParseLedger(e.Value())
			if err != nil {
				return nil, fmt.Errorf("the spend of the %s: %w", w, err)
			}
			st.SpentUSD, st.HeldUSD = float64(l.SpentNano)/nanoPerUSD, float64(l.HeldNano(now))/nanoPerUSD
		}
		st.Percent = st.SpentUSD / w.Limit * 100
		for _, t := range thresholds {
			if _, err := kv.Get(ctx, AlertMarker(w, t)); err == nil {
				st.Alerted = append(st.Alerted, t)
			}
		}
		out = append(out, st)
	}
	return out, nil
}

func windowsOf(scope, id string, l config.BudgetLimits, now time.Time) []BudgetWindow {
	var out []BudgetWindow
	for _, name := range config.BudgetWindows {
		if limit := l.Window(name); limit > 0 {
			out = append(out, BudgetWindow{Scope: scope, ID: id, Name: name, Period: periodOf(name, now), Limit: limit})
		}
	}
	return out
}

// spendingTenants are the tenants with a daily or monthly ledger of the
// current period (the only way a tenant only default_tenant caps is known).
func spendingTenants(ctx context.Context, kv jetstream.KeyValue, now time.Time) ([]string, error) {
	seen := map[string]bool{}
	for _, name := range []string{"daily", "monthly"} {
		lister, err := kv.ListKeysFiltered(ctx, fmt.Sprintf("%s.*.%s.%s", ScopeTenant, name, periodOf(name, now)))
		if err != nil {
			return nil, fmt.Errorf("list the tenants' spend: %w", err)
		}
		for k := range lister.Keys() {
			if parts := strings.Split(k, "."); len(parts) == 4 {
				seen[parts[1]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}
