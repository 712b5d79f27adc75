package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/nats-io/nats.go/jetstream"
)

// cmdCostExport prints one tenant's month as CSV or JSON, for its bill.
func cmdCostExport(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("cost export", cio.err)
	var c common
	c.register(fs)
	tenant := fs.String("tenant", "", "the tenant billed (required)")
	month := fs.String("month", "", "the month billed, YYYY-MM in UTC (required)")
	by := fs.String("by", "session", "one row per: "+strings.Join(accounting.ExportGroupings, ", "))
	format := fs.String("format", "csv", "csv or json")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	if *format != "csv" && *format != "json" {
		fmt.Fprintf(cio.err, "herald cost export: --format %q: want csv or json\n", *format)
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost export:", err)
		return exitUsage
	}
	dsn, stop, err := costStore(ctx, cfg, c.logger(cio.err, "warn"))
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost export:", err)
		return exitFail
	}
	defer stop()
	rep, err := accounting.Export(ctx, dsn, accounting.ExportQuery{Tenant: *tenant, Month: *month, By: *by})
	if errors.Is(err, accounting.ErrBadQuery) {
		fmt.Fprintln(cio.err, "herald cost export:", err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost export:", err)
		return exitFail
	}
	if rep.Total.UnpricedCalls > 0 {
		fmt.Fprintf(cio.err, "herald cost export: %d calls of the month had no price, so the total is a lower bound; add their prices and run herald cost reprice\n", rep.Total.UnpricedCalls)
	}
	return printReport(cio, "herald cost export", rep, *format == "json", rep.WriteCSV)
}

// cmdCostReprice prices stored usage rows again with the prices in force at
// their time (herald.yaml, imported, built-in) and writes corrections.
func cmdCostReprice(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("cost reprice", cio.err)
	var c common
	c.register(fs)
	since := fs.String("since", "", "only rows at or after this date (2026-11-01) or RFC 3339 time; default all")
	model := fs.String("model", "", "only this model's rows")
	dryRun := fs.Bool("dry-run", false, "say what would be corrected and write nothing")
	jsonOut := fs.Bool("json", false, "print JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	q := accounting.RepriceQuery{Model: *model, Reason: "herald cost reprice", DryRun: *dryRun}
	if *since != "" {
		t, err := pricing.ParseSince(*since)
		if err != nil {
			fmt.Fprintln(cio.err, "herald cost reprice: --"+err.Error())
			return exitUsage
		}
		q.Since = t
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost reprice:", err)
		return exitUsage
	}
	ctx, table, release, err := repriceTable(ctx, cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost reprice:", err)
		return exitFail
	}
	defer release()
	dsn, stop, err := costStore(ctx, cfg, c.logger(cio.err, "warn"))
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost reprice:", err)
		return exitFail
	}
	defer stop()
	rep, err := accounting.Reprice(ctx, dsn, table, q, time.Now())
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost reprice:", err)
		return exitFail
	}
	return printReport(cio, "herald cost reprice", rep, *jsonOut, func(w io.Writer) error { return rep.WriteTable(w) })
}

// repriceLease is the herald_accounting key a reprice holds while it runs:
// two at once would both correct a row.
const repriceLease = "reprice"

// repriceTable is the price table in force (herald.yaml's prices and the
// imported ones on the bus) with the reprice lease taken; the context
// returned ends if the lease is lost, and release gives it back.
func repriceTable(ctx context.Context, cfg config.Config) (context.Context, pricing.Table, func(), error) {
	js, closeFn, err := openBus(cfg)
	if err != nil {
		return ctx, pricing.Table{}, nil, fmt.Errorf("the imported prices are on the bus: %w", err)
	}
	table, err := tableInForce(ctx, js, cfg)
	if err != nil {
		closeFn()
		return ctx, table, nil, err
	}
	rctx, release, err := takeRepriceLease(ctx, js)
	if err != nil {
		closeFn()
		return ctx, table, nil, err
	}
	return rctx, table, func() { release(); closeFn() }, nil
}

// tableInForce is herald.yaml's prices with the imported ones beside them.
func tableInForce(ctx context.Context, js jetstream.JetStream, cfg config.Config) (pricing.Table, error) {
	table := pricing.NewTable(cfg.Pricing)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := pricesBucket(ctx, js, cfg.Replicas)
	if err != nil {
		return table, err
	}
	imported, bad, err := bus.LoadImportedPrices(ctx, kv)
	if err != nil {
		return table, err
	}
	if len(bad) > 0 {
		return table, fmt.Errorf("imported prices that do not decode (import them again): %w", errors.Join(bad...))
	}
	return table.WithImported(imported), nil
}

// takeRepriceLease creates the reprice lease and renews it (the bucket
// forgets a key after bus.AccountingLeaseTTL) until release; the context
// returned ends if it is lost.
func takeRepriceLease(ctx context.Context, js jetstream.JetStream) (context.Context, func(), error) {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leases, err := js.KeyValue(octx, bus.BucketAccounting)
	if err != nil {
		return ctx, nil, err
	}
	stamp := func() []byte { return []byte(time.Now().UTC().Format(time.RFC3339)) }
	rev, err := leases.Create(octx, repriceLease, stamp())
	if errors.Is(err, jetstream.ErrKeyExists) {
		return ctx, nil, fmt.Errorf("another herald cost reprice is running (lease %q in %s; it lapses by itself within %s if that one died)",
			repriceLease, bus.BucketAccounting, bus.AccountingLeaseTTL)
	}
	if err != nil {
		return ctx, nil, err
	}
	rctx, lost := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(bus.AccountingLeaseTTL / 4)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				uctx, cancel := context.WithTimeout(rctx, bus.AccountingLeaseTTL/2)
				next, err := leases.Update(uctx, repriceLease, stamp(), rev)
				cancel()
				if err != nil {
					lost(fmt.Errorf("the reprice lease was lost: %w", err))
					return
				}
				rev = next
			}
		}
	}()
	release := func() {
		close(done)
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = leases.Delete(dctx, repriceLease)
		lost(nil)
	}
	return rctx, release, nil
}

// cmdCostCorrections lists the price corrections reprices wrote (the audit
// trail: which row, from what to what, when, why).
func cmdCostCorrections(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("cost corrections", cio.err)
	var c common
	c.register(fs)
	since := fs.String("since", "", "only corrections of rows at or after this date or RFC 3339 time")
	model := fs.String("model", "", "only this model's")
	tenant := fs.String("tenant", "", "only this tenant's")
	limit := fs.Int("limit", 1000, "at most this many, the latest first")
	jsonOut := fs.Bool("json", false, "print JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	q := accounting.CorrectionsQuery{Model: *model, Tenant: *tenant, Limit: *limit}
	if *since != "" {
		t, err := pricing.ParseSince(*since)
		if err != nil {
			fmt.Fprintln(cio.err, "herald cost corrections: --"+err.Error())
			return exitUsage
		}
		q.Since = t
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost corrections:", err)
		return exitUsage
	}
	dsn, stop, err := costStore(ctx, cfg, c.logger(cio.err, "warn"))
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost corrections:", err)
		return exitFail
	}
	defer stop()
	cs, err := accounting.QueryCorrections(ctx, dsn, q)
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost corrections:", err)
		return exitFail
	}
	if *jsonOut {
		printJSONList(cio.out, cs)
		return exitOK
	}
	if err := accounting.WriteCorrections(cio.out, cs); err != nil {
		fmt.Fprintln(cio.err, "herald cost corrections:", err)
		return exitFail
	}
	return exitOK
}
