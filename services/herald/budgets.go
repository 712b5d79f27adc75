package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heraldrun/herald/services/gateway"
)

const budgetsUsage = `usage: herald budgets [--json]`

// cmdBudgets shows every budget window of herald.yaml's budgets against
// what it has spent in its current period, what calls in flight hold, and
// the thresholds already alerted.
func cmdBudgets(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("budgets", cio.err)
	var c common
	c.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 0 {
		fmt.Fprintln(cio.err, budgetsUsage)
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald budgets:", err)
		return exitUsage
	}
	if !cfg.Budgets.Configured() {
		if *jsonOut {
			fmt.Fprintln(cio.out, "[]")
		} else {
			fmt.Fprintln(cio.out, "No budgets are set (budgets: in herald.yaml, docs/COSTS.md).")
		}
		return exitOK
	}
	js, closeFn, err := openBus(cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald budgets:", err)
		return exitFail
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	report, err := gateway.BudgetReport(ctx, js, cfg.Budgets, time.Now())
	if err != nil {
		fmt.Fprintln(cio.err, "herald budgets:", err)
		return exitFail
	}
	if *jsonOut {
		printJSONList(cio.out, report)
		return exitOK
	}
	tw := tabwriter.NewWriter(cio.out, 0, 2, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SCOPE\tID\tWINDOW\tPERIOD\tSPENT\tHELD\tLIMIT\tUSED\tALERTED\t")
	for _, s := range report {
		id := s.ID
		if s.Default {
			id += " (default_tenant)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t$%.4f\t$%.4f\t$%.4f\t%.1f%%\t%s\t\n", s.Scope, id, s.Window, s.Period,
			s.SpentUSD, s.HeldUSD, s.LimitUSD, s.Percent, percents(s.Alerted))
	}
	_ = tw.Flush()
	return exitOK
}

func percents(ts []float64) string {
	if len(ts) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range ts {
		parts = append(parts, strconv.FormatFloat(t, 'f', -1, 64)+"%")
	}
	return strings.Join(parts, " ")
}
