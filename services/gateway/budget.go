package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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

// Who a budget window caps.
const (
	ScopeTenant   = "tenant"
	ScopeKey      = "key"
	ScopeSchedule = "schedule"
)

// BudgetWindow is one capped window of one payer (a tenant, an API key or
// a schedule) in one period: the day or month it covers in budgets.timezone,
// or "all" for the total.
type BudgetWindow struct {
	Scope, ID string
	Name      string // total, daily or monthly
	Period    string // all, 2026-12-03 or 2026-12
	Limit     float64
}

// periodOf is the period of window name holding t (in t's zone).
func periodOf(name string, t time.Time) string {
	switch name {
	case "daily":
		return t.Format("2006-01-02")
	case "monthly":
		return t.Format("2006-01")
	}
	return "all"
}

func (w BudgetWindow) limitNano() uint64 { return uint64(math.Round(w.Limit * nanoPerUSD)) }

// Key is the window's ledger in the herald_spend bucket. A tenant's total
// keeps Herald's earlier key (the tenant's name), so the lifetime spend
// recorded before windows existed still counts.
func (w BudgetWindow) Key() string {
	if w.Scope == ScopeTenant && w.Name == "total" {
		return bus.Token(w.ID)
	}
	return fmt.Sprintf("%s.%s.%s.%s", w.Scope, bus.Token(w.ID), w.Name, w.Period)
}

// String names the window as errors and alerts write it.
func (w BudgetWindow) String() string {
	if w.Name == "total" {
		return fmt.Sprintf("%s %q total budget ($%.4f)", w.Scope, w.ID, w.Limit)
	}
	return fmt.Sprintf("%s %q %s window %s ($%.4f)", w.Scope, w.ID, w.Name, w.Period, w.Limit)
}

// BudgetWindows lists the capped windows a call of tenant (started by the
// API key keyID, fired by the schedule scheduleID; either may be "") falls
// in at t.
func BudgetWindows(b config.Budgets, loc *time.Location, tenant, keyID, scheduleID string, t time.Time) []BudgetWindow {
	t = t.In(loc)
	var out []BudgetWindow
	add := func(scope, id string, l config.BudgetLimits) {
		for _, name := range config.BudgetWindows {
			if limit := l.Window(name); limit > 0 {
				out = append(out, BudgetWindow{Scope: scope, ID: id, Name: name, Period: periodOf(name, t), Limit: limit})
			}
		}
	}
	add(ScopeTenant, tenant, b.ForTenant(tenant))
	if keyID != "" {
		add(ScopeKey, keyID, b.Keys[keyID])
	}
	if scheduleID != "" {
		add(ScopeSchedule, scheduleID, b.Schedules[scheduleID])
	}
	return out
}

// Ledger is what one window has spent and holds for calls in flight.
// Stored as JSON; a ledger holding nothing is the plain decimal nano-USD
// Herald wrote before reservations existed (and still reads).
type Ledger struct {
	SpentNano uint64          `json:"spent_nano"`
	Held      map[string]Hold `json:"held,omitempty"`
}

// Hold is a reservation: the most a call in flight may cost, kept until
// the call settles or, should its gateway die, until UntilMs.
type Hold struct {
	Nano    uint64 `json:"nano"`
	UntilMs int64  `json:"until_ms"`
}

// ParseLedger reads a ledger in either form.
func ParseLedger(data []byte) (Ledger, error) {
	if n, err := strconv.ParseUint(string(data), 10, 64); err == nil {
		return Ledger{SpentNano: n}, nil
	}
	var l Ledger
	if err := json.Unmarshal(data, &l); err != nil {
		return Ledger{}, fmt.Errorf("not a spend ledger: %q", data)
	}
	return l, nil
}

func (l Ledger) encode() []byte {
	if len(l.Held) == 0 {
		return []byte(strconv.FormatUint(l.SpentNano, 10))
	}
	data, _ := json.Marshal(l)
	return data
}

// HeldNano is what the holds still in force reserve at now.
func (l Ledger) HeldNano(now time.Time) uint64 {
	var n uint64
	for _, h := range l.Held {
		if h.UntilMs > now.UnixMilli() {
			n += h.Nano
		}
	}
	return n
}

// expire drops the holds of calls whose gateway never settled them.
func (l *Ledger) expire(now time.Time) {
	for id, h := range l.Held {
		if h.UntilMs <= now.UnixMilli() {
			delete(l.Held, id)
		}
	}
}

// spendLedgers keeps the windows' ledgers in the herald_spend bucket, shared
// by every gateway process: each change is a compare-and-set of the
// window's key, so no two processes ever both take the last of a window.
type spendLedgers struct {
	kv  *bus.LazyBucket
	log zerolog.Logger
}

// errWindowFull is returned by a ledger change refused by its window.
var errWindowFull = errors.New("budget window used up")

// errWindowBusy: calls in flight hold the rest of the window; wait for them.
var errWindowBusy = errors.New("budget window held by calls in flight")

// update applies change to w's ledger with compare-and-set, again and again
// while other processes change it first, until ctx ends.
func (s *spendLedgers) update(ctx context.Context, w BudgetWindow, change func(*Ledger) error) (Ledger, error) {
	kv, err := s.kv.Open(ctx)
	if err != nil {
		return Ledger{}, fmt.Errorf("spend bucket: %w", err)
	}
	key := w.Key()
	for try := 0; ; try++ {
		var l Ledger
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return Ledger{}, fmt.Errorf("read the spend of the %s: %w", w, err)
		default:
			if l, err = ParseLedger(e.Value()); err != nil {
				return Ledger{}, fmt.Errorf("the spend of the %s (key %s of %s): %w", w, key, bus.BucketSpend, err)
			}
			rev = e.Revision()
		}
		if l.Held == nil {
			l.Held = map[string]Hold{}
		}
		if err := change(&l); err != nil {
			return l, err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, l.encode())
		} else {
			_, err = kv.Update(ctx, key, l.encode(), rev)
		}
		if err == nil {
			return l, nil
		}
		// another process changed it first: read it again, after a short
		// random pause so the contenders spread out
		pause := time.Duration(rand.Int64N(int64(time.Millisecond) << min(try, 5)))
		if !sleep(ctx, pause) {
			return Ledger{}, fmt.Errorf("record the spend of the %s: %w", w, ctx.Err())
		}
	}
}

// Refusal is a call refused by a window: the window and what it had spent.
type Refusal struct {
	Window    BudgetWindow
	SpentNano uint64
}

// reserve holds est nano-USD in every window for the call hold, refusing
// it when a window has spent its limit. A window whose rest is held by calls
// in flight makes the call wait for them (they may cost less than they
// hold). On refusal or error nothing stays held.
func (s *spendLedgers) reserve(ctx context.Context, windows []BudgetWindow, hold string, est uint64, until time.Time, now func() time.Time) (*Refusal, error) {
	for i, w := range windows {
		limit := w.limitNano()
		for wait := 0; ; wait++ {
			l, err := s.update(ctx, w, func(l *Ledger) error {
				l.expire(now())
				if _, again := l.Held[hold]; again {
					return nil // a retried write that had landed
				}
				if l.SpentNano >= limit {
					return errWindowFull
				}
				if l.SpentNano+l.HeldNano(now()) >= limit {
					return errWindowBusy
				}
				l.Held[hold] = Hold{Nano: est, UntilMs: until.UnixMilli()}
				return nil
			})
			if errors.Is(err, errWindowBusy) {
				if sleep(ctx, busyPause(wait)) {
					continue
				}
				err = fmt.Errorf("waiting for the calls in flight that hold the rest of the %s: %w", w, ctx.Err())
			}
			if err != nil {
				s.settle(context.WithoutCancel(ctx), windows[:i], hold, 0)
				if errors.Is(err, errWindowFull) {
					return &Refusal{Window: w, SpentNano: l.SpentNano}, nil
				}
				return nil, err
			}
			break
		}
	}
	return nil, nil
}

// busyPause is how long a call waits before looking again at a window held
// by calls in flight.
func busyPause(wait int) time.Duration {
	d := 10 * time.Millisecond << min(wait, 5)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

// settle ends the hold in every window, adding cost to what it spent, and
// returns the windows' ledgers after it (for alerts). A window it could not
// update is logged: the hold then expires on its own.
func (s *spendLedgers) settle(ctx context.Context, windows []BudgetWindow, hold string, cost uint64) []Ledger {
	out := make([]Ledger, len(windows))
	for i, w := range windows {
		l, err := s.update(ctx, w, func(l *Ledger) error {
			if _, ok := l.Held[hold]; !ok && cost == 0 {
				return errNothingToDo
			}
			delete(l.Held, hold)
			l.SpentNano += cost
			return nil
		})
		if err != nil && !errors.Is(err, errNothingToDo) {
			s.log.Warn().Err(err).Str("window", w.String()).Uint64("cost_nano_usd", cost).Msg("budget window not updated")
		}
		out[i] = l
	}
	return out
}

var errNothingToDo = errors.New("nothing to do")

// read returns w's ledger as it stands.
func (s *spendLedgers) read(ctx context.Context, w BudgetWindow) (Ledger, error) {
	l, err := s.update(ctx, w, func(*Ledger) error { return errNothingToDo })
	if errors.Is(err, errNothingToDo) {
		err = nil
	}
	return l, err
}
