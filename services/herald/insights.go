package main

import (
	"context"
	"fmt"

	"github.com/heraldrun/herald/services/accounting"
)

func cmdInsights(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("insights", cio.err)
	var c common
	c.register(fs)
	since := fs.String("since", "7d", "only the last DURATION (e.g. 7d, 24h; 0: all time)")
	jsonOut := fs.Bool("json", false, "print JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	window, err := parseAge(*since)
	if err != nil {
		fmt.Fprintln(cio.err, "herald insights: --since:", err)
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald insights:", err)
		return exitUsage
	}
	dsn, stop, err := costStore(ctx, cfg, c.logger(cio.err, "warn"))
	if err != nil {
		fmt.Fprintln(cio.err, "herald insights:", err)
		return exitFail
	}
	defer stop()
	rep, err := accounting.QueryInsights(ctx, dsn, window)
	if err != nil {
		fmt.Fprintln(cio.err, "herald insights:", err)
		return exitFail
	}
	return printReport(cio, "herald insights", rep, *jsonOut, rep.WriteText)
}
