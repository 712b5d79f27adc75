package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/services/accounting"
)

func cmdCost(ctx context.Context, args []string, cio cliIO) int {
	if len(args) > 0 {
		switch args[0] {
		case "export":
			return cmdCostExport(ctx, args[1:], cio)
		case "reprice":
			return cmdCostReprice(ctx, args[1:], cio)
		case "corrections":
			return cmdCostCorrections(ctx, args[1:], cio)
		}
	}
	fs := newFlagSet("cost", cio.err)
	var c common
	c.register(fs)
	by := fs.String("by", "model", "group by: "+strings.Join(accounting.CostGroupings, ", ")+", tool (run time, result size and context cost per tool)")
	since := ageFlag(fs, "since", "only the last DURATION (e.g. 7d, 24h); default all time")
	session := fs.String("session", "", "only this session")
	tenant := fs.String("tenant", "", "only this tenant")
	month := fs.String("month", "", "only this month, YYYY-MM in UTC (not with --since)")
	jsonOut := fs.Bool("json", false, "print JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost:", err)
		return exitUsage
	}
	dsn, stop, err := costStore(ctx, cfg, c.logger(cio.err, "warn"))
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost:", err)
		return exitFail
	}
	defer stop()
	if *by == "tool" {
		if *month != "" {
			fmt.Fprintln(cio.err, "herald cost: --by tool takes --since, not --month")
			return exitUsage
		}
		return costByTool(ctx, cio, dsn, accounting.ToolCostQuery{Since: *since, Session: *session, Tenant: *tenant}, *jsonOut)
	}
	rep, err := accounting.QueryCost(ctx, dsn, accounting.CostQuery{By: *by, Since: *since, Session: *session, Tenant: *tenant, Month: *month})
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost:", err)
		return exitFail
	}
	return printReport(cio, "herald cost", rep, *jsonOut, rep.WriteTable)
}

// costByTool prints what each tool cost: runs, run time, result size and
// what carrying its results in later model calls cost.
func costByTool(ctx context.Context, cio cliIO, dsn string, q accounting.ToolCostQuery, jsonOut bool) int {
	rep, err := accounting.QueryToolCost(ctx, dsn, q)
	if err != nil {
		fmt.Fprintln(cio.err, "herald cost:", err)
		return exitFail
	}
	return printReport(cio, "herald cost", rep, jsonOut, rep.WriteTable)
}

// printReport prints a report as indented JSON, or as the text its write
// makes.
func printReport(cio cliIO, cmd string, rep any, jsonOut bool, write func(io.Writer) error) int {
	if jsonOut {
		enc := json.NewEncoder(cio.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return exitOK
	}
	if err := write(cio.out); err != nil {
		fmt.Fprintln(cio.err, cmd+":", err)
		return exitFail
	}
	return exitOK
}

// clickHouseDSN is HERALD_CLICKHOUSE_DSN, else the private server's that
// `herald up` recorded in the data dir.
func clickHouseDSN(cfg config.Config) string {
	if cfg.ClickHouseDSN != "" {
		return cfg.ClickHouseDSN
	}
	data, err := os.ReadFile(filepath.Join(cfg.DataDir, dsnFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func cmdMigrate(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("migrate", cio.err)
	var c common
	c.register(fs)
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald migrate:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	applied, err := accounting.Migrate(ctx, clickHouseDSN(cfg))
	if err != nil {
		fmt.Fprintln(cio.err, "herald migrate:", err)
		return exitFail
	}
	fmt.Fprintf(cio.out, "schema up to date; applied now: %v\n", applied)
	return exitOK
}
