package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

const statusUsage = `usage: herald status [--json] [--scan N]

What Herald has to do and who does it, read from NATS (HERALD_NATS_URL):
per consumer and per tenant the work waiting, in flight and the age of the
oldest waiting; the tool runners of each pool. A pool with work and no
runner is flagged.`

// cmdStatus is `herald status`.
func cmdStatus(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("status", cio.err)
	var c common
	c.register(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	scan := fs.Int("scan", 5000, "unacknowledged messages read per stream for the tenant and pool figures")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 || *scan < 1 {
		fmt.Fprintln(cio.err, statusUsage)
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald status:", err)
		return exitUsage
	}
	js, closeFn, err := openBus(cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald status:", err)
		return exitFail
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep, err := collectCapacity(ctx, js, capacityOptions{defaultTenant: cfg.Tenant, scanLimit: *scan,
		warnAfter: poolWarningAfter(cfg.Tools.PoolWarningAfter), pingWait: 300 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(cio.err, "herald status:", err)
		return exitFail
	}
	if *jsonOut {
		data, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(cio.out, string(data))
		return exitOK
	}
	printCapacity(cio.out, rep)
	return exitOK
}

// poolWarningAfter is tools.pool_warning_after with the loop's default.
func poolWarningAfter(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return 10 * time.Second
}

func printCapacity(w io.Writer, rep capacityReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tCONSUMER\tWAITING\tIN FLIGHT\tPULLS\tOLDEST")
	for _, c := range rep.Consumers {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", c.Stream, c.Consumer, c.Waiting, c.InFlight, c.Pulls, age(c.OldestAgeS))
	}
	fmt.Fprintln(tw, "\nTENANT\tSTREAM\tWAITING\tIN FLIGHT\tOLDEST\t")
	for _, t := range rep.Tenants {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", t.Tenant, t.Stream, t.Waiting, t.InFlight, age(t.OldestAgeS))
	}
	fmt.Fprintln(tw, "\nPOOL\tRUNNERS\tWAITING\tIN FLIGHT\tOLDEST\t")
	for _, p := range rep.Pools {
		flag := ""
		if p.NoRunner {
			flag = "  ← no runner"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", p.Pool, p.Runners, p.Waiting, p.InFlight, age(p.OldestAgeS), flag)
	}
	_ = tw.Flush()
	if rep.Partial {
		fmt.Fprintln(w, "\n(tenant and pool figures from the first messages of each stream only: --scan reads more)")
	}
	for _, msg := range rep.Warnings {
		fmt.Fprintln(w, "\nwarning:", msg)
	}
}

func age(s float64) string {
	if s <= 0 {
		return "-"
	}
	return seconds(s)
}
