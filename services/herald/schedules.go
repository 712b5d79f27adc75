package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/services/api"
	"github.com/nats-io/nats.go/jetstream"
)

const schedulesUsage = `usage: herald schedules add (--cron "0 9 * * 1-5" [--tz ZONE] | --every 15m | --at 2026-12-24T09:00:00Z) [--tenant T] [--max-cost-usd X] [--model M] [--missed run-once|skip] "PROMPT"
       herald schedules list [--json] | pause ID | resume ID | remove ID`

// cmdSchedules manages schedules: prompts JetStream fires on a timetable,
// each fire a task (docs/API.md). A running api service (herald up, herald
// serve api) turns fires into tasks.
func cmdSchedules(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("schedules", cio.err)
	var c common
	c.register(fs)
	var sc api.Schedule
	fs.StringVar(&sc.Cron, "cron", "", `add: five-field cron expression, e.g. "0 9 * * 1-5"`)
	fs.StringVar(&sc.TZ, "tz", "", "add: time zone of --cron (default UTC)")
	fs.StringVar(&sc.Every, "every", "", "add: fire every this long, e.g. 15m")
	fs.StringVar(&sc.At, "at", "", "add: fire once at this time (RFC 3339)")
	fs.StringVar(&sc.Tenant, "tenant", "", "add: tenant the runs belong to")
	fs.StringVar(&sc.Model, "model", "", "add: model for the runs")
	fs.Float64Var(&sc.MaxCostUSD, "max-cost-usd", 0, "add: stop a fire's run when it has cost this many USD")
	fs.StringVar(&sc.Missed, "missed", "", "add: a fire NATS was down for: run-once (default: run it once, late) or skip (record it as missed)")
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	want := map[string]int{"add": 2, "list": 1, "pause": 2, "resume": 2, "remove": 2}
	if len(pos) == 0 || want[pos[0]] != len(pos) {
		fmt.Fprintln(cio.err, schedulesUsage)
		return exitUsage
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald schedules:", err)
		return exitUsage
	}
	js, closeFn, err := openBus(cfg)
	if err != nil {
		fmt.Fprintln(cio.err, "herald schedules:", err)
		return exitFail
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := bus.Ensure(ctx, js, cfg.Replicas); err != nil {
		fmt.Fprintln(cio.err, "herald schedules:", err)
		return exitFail
	}
	switch pos[0] {
	case "add":
		sc.Prompt = pos[1]
		return addSchedule(ctx, js, sc, cio, *jsonOut)
	case "list":
		return listSchedules(ctx, js, cio, *jsonOut)
	}
	op := map[string]func(context.Context, jetstream.JetStream, string) error{"pause": api.PauseSchedule, "resume": api.ResumeSchedule, "remove": api.RemoveSchedule}[pos[0]]
	if err := op(ctx, js, pos[1]); err != nil {
		fmt.Fprintf(cio.err, "herald schedules %s: %v\n", pos[0], err)
		if errors.Is(err, api.ErrNoSuchSchedule) {
			return exitUsage
		}
		return exitFail
	}
	fmt.Fprintf(cio.out, "%s %s\n", map[string]string{"pause": "paused", "resume": "resumed", "remove": "removed"}[pos[0]], pos[1])
	return exitOK
}

func addSchedule(ctx context.Context, js jetstream.JetStream, sc api.Schedule, cio cliIO, jsonOut bool) int {
	sc, err := api.AddSchedule(ctx, js, sc)
	if err != nil {
		fmt.Fprintln(cio.err, "herald schedules add:", err)
		if errors.Is(err, api.ErrInvalidSchedule) {
			return exitUsage
		}
		return exitFail
	}
	if jsonOut {
		data, _ := json.Marshal(map[string]any{"id": sc.ID, "next_fire": sc.NextFire})
		fmt.Fprintln(cio.out, string(data))
		return exitOK
	}
	fmt.Fprintf(cio.err, "Schedule added; next fire %s.\n", sc.NextFire.Format(time.RFC3339))
	fmt.Fprintln(cio.out, sc.ID)
	return exitOK
}

func listSchedules(ctx context.Context, js jetstream.JetStream, cio cliIO, jsonOut bool) int {
	list, err := api.ListSchedules(ctx, js)
	if err != nil {
		fmt.Fprintln(cio.err, "herald schedules list:", err)
		return exitFail
	}
	if jsonOut {
		printJSONList(cio.out, list)
		return exitOK
	}
	tw := tabwriter.NewWriter(cio.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWHEN\tSTATUS\tNEXT FIRE\tLAST FIRE\tFIRES\tMISSED\tLAST SESSION\tOUTCOME\tPROMPT")
	for _, sc := range list {
		when := firstSet("cron "+sc.Cron, sc.Cron, "every "+sc.Every, sc.Every, "at "+sc.At, sc.At)
		status := "active"
		if sc.Paused {
			status = "paused"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", sc.ID, when, status, shownTime(sc.NextFire), shownTime(sc.LastFire),
			sc.Fires, sc.MissedFires, sc.LastSessID, sc.LastOutcome, shorten(sc.Prompt, 40))
	}
	_ = tw.Flush()
	return exitOK
}

// firstSet returns the label of the first (label, value) pair whose value is set.
func firstSet(pairs ...string) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			return pairs[i]
		}
	}
	return ""
}

func shownTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.DateTime)
}
