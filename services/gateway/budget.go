package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
)

// nanoPerUSD converts between the two money units the gateway uses.
const nanoPerUSD = 1e9

// checkSessionBudget refuses a call once the session (the task's
// max_cost_usd, as the loop reports what it has spent) has used its money.
func checkSessionBudget(req *heraldpb.LLMRequest, spentInCallNano uint64) *attemptError {
	limit := req.GetMaxCostUsd()
	if limit <= 0 {
		return nil
	}
	spent := req.GetSpentUsd() + float64(spentInCallNano)/nanoPerUSD
	if spent < limit {
		return nil
	}
	return newAttemptError(ClassBudgetExceeded, fmt.Sprintf(
		"the task's money budget is used up: $%.4f spent of max_cost_usd $%.4f; no further model calls were made",
		spent, limit), nil)
}

// tenantSpend keeps what each tenant has spent in the herald_spend bucket
// (key: tenant, value: nano-USD as decimal text), shared by every gateway.
type tenantSpend struct {
	js      jetstream.JetStream
	budgets map[string]float64

	once sync.Once
	kv   jetstream.KeyValue
	err  error
}

func newTenantSpend(js jetstream.JetStream, budgets map[string]float64) *tenantSpend {
	return &tenantSpend{js: js, budgets: budgets}
}

func (t *tenantSpend) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	t.once.Do(func() { t.kv, t.err = t.js.KeyValue(ctx, bus.BucketSpend) })
	return t.kv, t.err
}

// Spent returns the tenant's total spend in nano-USD.
func (t *tenantSpend) spent(ctx context.Context, tenant string) (uint64, uint64, error) {
	kv, err := t.bucket(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("spend bucket: %w", err)
	}
	e, err := kv.Get(ctx, bus.Token(tenant))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read spend of tenant %s: %w", tenant, err)
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, e.Revision(), fmt.Errorf("spend of tenant %s is not a number: %w", tenant, err)
	}
	return n, e.Revision(), nil
}

// check refuses a call when the tenant has a budget and has used it up.
func (t *tenantSpend) check(ctx context.Context, tenant string) *attemptError {
	limit := t.budgets[tenant]
	if limit <= 0 {
		return nil
	}
	n, _, err := t.spent(ctx, tenant)
	if err != nil {
		return newAttemptError(ClassBudgetExceeded, "the tenant's spend could not be read, so its budget cannot be enforced: "+err.Error(), err)
	}
	if spent := float64(n) / nanoPerUSD; spent >= limit {
		return newAttemptError(ClassBudgetExceeded, fmt.Sprintf(
			"tenant %q has used its money budget: $%.4f spent of $%.4f; no further model calls were made", tenant, spent, limit), nil)
	}
	return nil
}

// add records nano-USD spent by tenant, retrying on concurrent updates.
func (t *tenantSpend) add(ctx context.Context, tenant string, nano uint64) error {
	// Only budgeted tenants are tracked here (ClickHouse is the ledger): one
	// compare-and-set key per tenant serialises every call of that tenant,
	// which throttled 1,000 concurrent sessions to a crawl.
	if nano == 0 || t.budgets[tenant] <= 0 {
		return nil
	}
	kv, err := t.bucket(ctx)
	if err != nil {
		return err
	}
	key := bus.Token(tenant)
	for range 20 {
		cur, rev, err := t.spent(ctx, tenant)
		if err != nil && rev == 0 {
			return err // unreadable; a garbled value (rev > 0) is overwritten
		}
		next := []byte(strconv.FormatUint(cur+nano, 10))
		if rev == 0 {
			_, err = kv.Create(ctx, key, next)
		} else {
			_, err = kv.Update(ctx, key, next, rev)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("record spend of tenant %s: too many concurrent updates", tenant)
}
