package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// estimateOutputTokens is the output a call that sets no max_output_tokens
// is reserved for.
const estimateOutputTokens = 4096

// budgetGuard checks every attempt against its budget windows: it holds
// the attempt's estimated cost in each window before the provider is
// asked, and settles the hold with the real cost after.
type budgetGuard struct {
	cfg     config.Budgets
	loc     *time.Location
	now     func() time.Time
	holdFor time.Duration
	ledgers *spendLedgers
	alerts  *budgetAlerts
}

func newBudgetGuard(cfg Config, js jetstream.JetStream, log zerolog.Logger) (*budgetGuard, error) {
	loc, err := cfg.Budgets.Location()
	if err != nil {
		return nil, fmt.Errorf("gateway: budgets.timezone: %w", err)
	}
	kv := bus.NewLazyBucket(js, bus.BucketSpend)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &budgetGuard{cfg: cfg.Budgets, loc: loc, now: now,
		holdFor: cfg.Retry.CallTimeout + time.Minute,
		ledgers: &spendLedgers{kv: kv, log: log},
		alerts:  &budgetAlerts{js: js, kv: kv, thresholds: cfg.Budgets.Thresholds(), log: log, now: now}}, nil
}

// budgetHold is an attempt's reservation.
type budgetHold struct {
	id      string
	windows []BudgetWindow
	tenant  string
}

// reserve holds the attempt's estimated cost in its windows, or refuses it.
func (g *budgetGuard) reserve(ctx context.Context, r *callRun, ep endpoint) (*budgetHold, *attemptError) {
	windows := BudgetWindows(g.cfg, g.loc, r.tenant, r.req.GetApiKeyId(), r.req.GetScheduleId(), g.now())
	if len(windows) == 0 {
		return nil, nil
	}
	h := &budgetHold{id: r.holdID(), windows: windows, tenant: r.tenant}
	est := r.estimate(ep)
	refused, err := g.ledgers.reserve(ctx, windows, h.id, est, g.now().Add(g.holdFor), g.now)
	if err != nil {
		if ctx.Err() != nil {
			return nil, r.stopped(ctx, nil)
		}
		return nil, newAttemptError(ClassBudgetExceeded, "the spend of the call's budget windows could not be read, so they cannot be enforced: "+err.Error(), err)
	}
	if refused != nil {
		w := refused.Window
		g.alerts.crossed(ctx, r.tenant, w, refused.SpentNano, true)
		return nil, newAttemptError(ClassBudgetExceeded, fmt.Sprintf(
			"the %s is used up: $%.4f spent of $%.4f; no further model calls were made",
			w, float64(refused.SpentNano)/nanoPerUSD, w.Limit), nil)
	}
	return h, nil
}

// settle ends h with the attempt's real cost and announces the thresholds
// it crossed.
func (g *budgetGuard) settle(ctx context.Context, h *budgetHold, cost uint64) {
	if h == nil {
		return
	}
	ledgers := g.ledgers.settle(ctx, h.windows, h.id, cost)
	if cost == 0 {
		return
	}
	for i, w := range h.windows {
		g.alerts.crossed(ctx, h.tenant, w, ledgers[i].SpentNano, false)
	}
}

// holdID names an attempt's hold: its request, delivery and attempt.
func (r *callRun) holdID() string {
	return fmt.Sprintf("%s:d%d:%d", r.req.GetRequestId(), r.delivery, r.attempts+1)
}

// estimate is what the attempt may cost at most, as far as can be told
// before asking: its messages (about four characters a token) as input and
// its max_output_tokens (or estimateOutputTokens) as output, at the
// model's price now (tokens only: a per-request fee is settled, not held).
func (r *callRun) estimate(ep endpoint) uint64 {
	chars := 0
	for _, m := range r.req.GetMessages() {
		chars += len(m.GetContent()) + len(m.GetReasoning())
		for _, tc := range m.GetToolCalls() {
			chars += len(tc.GetArguments()) + len(tc.GetName())
		}
	}
	out := int64(r.req.GetMaxOutputTokens())
	if out <= 0 {
		out = estimateOutputTokens
	}
	cost, _ := r.s.pricer.CostNano(r.modelFor(ep), &heraldpb.Usage{InputTokens: int64(chars/4 + 1), OutputTokens: out})
	return cost
}

// budgetAlerts announces threshold crossings, each once across every
// gateway: the first process to create the alert's marker key in the
// herald_spend bucket publishes it.
type budgetAlerts struct {
	js         jetstream.JetStream
	kv         *bus.LazyBucket
	thresholds []float64
	log        zerolog.Logger
	now        func() time.Time
	// fired are the markers this process knows exist.
	fired sync.Map
}

// AlertMarker is the key marking that window w's threshold alert was sent.
func AlertMarker(w BudgetWindow, threshold float64) string {
	t := strings.ReplaceAll(strconv.FormatFloat(threshold, 'f', -1, 64), ".", "_")
	return fmt.Sprintf("alert.%s.%s.%s.%s.%s", w.Scope, bus.Token(w.ID), w.Name, w.Period, t)
}

// crossed announces every threshold spent has reached in w; a refused call
// announces 100 %.
func (a *budgetAlerts) crossed(ctx context.Context, tenant string, w BudgetWindow, spent uint64, refused bool) {
	limit := w.limitNano()
	if limit == 0 {
		return
	}
	pct := float64(spent) / float64(limit) * 100
	hundred := false
	for _, t := range a.thresholds {
		hundred = hundred || t == 100
		if pct >= t || (refused && t == 100) {
			a.fire(ctx, tenant, w, t, spent, refused && t == 100)
		}
	}
	if refused && !hundred {
		a.fire(ctx, tenant, w, 100, spent, true)
	}
}

func (a *budgetAlerts) fire(ctx context.Context, tenant string, w BudgetWindow, threshold float64, spent uint64, refused bool) {
	marker := AlertMarker(w, threshold)
	if _, ok := a.fired.Load(marker); ok {
		return
	}
	ctx, cancel := publishCtx(ctx)
	defer cancel()
	kv, err := a.kv.Open(ctx)
	if err != nil {
		a.log.Warn().Err(err).Msg("budget alert not sent: spend bucket")
		return
	}
	if _, err := kv.Create(ctx, marker, []byte(a.now().UTC().Format(time.RFC3339))); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			a.fired.Store(marker, struct{}{}) // another process sent it
			return
		}
		a.log.Warn().Err(err).Str("alert", marker).Msg("budget alert not sent")
		return
	}
	alert := proto.BudgetAlert{Tenant: tenant, Scope: w.Scope, ID: w.ID, Window: w.Name, Period: w.Period,
		Spent: float64(spent) / nanoPerUSD, Limit: w.Limit, Threshold: threshold, Refused: refused,
		TS: a.now().UTC().Format(time.RFC3339Nano)}
	if err := bus.PublishJSON(ctx, a.js, bus.BudgetAlertsSubject, marker, alert); err != nil {
		// no alert went out: let the next call that sees the crossing send it
		_ = kv.Delete(ctx, marker)
		a.log.Warn().Err(err).Str("alert", marker).Msg("budget alert not published; it is sent again with the window's next call")
		return
	}
	a.fired.Store(marker, struct{}{})
	telemetry.BudgetAlert(w.Scope, w.ID, tenant, w.Name, threshold)
	a.log.Info().Str("tenant", tenant).Str("window", w.String()).Float64("threshold", threshold).
		Float64("spent_usd", alert.Spent).Bool("refused", refused).Msg("budget alert")
}
