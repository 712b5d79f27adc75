// Command herald is the one binary users run: the CLI, and every Herald
// service in one process over an embedded JetStream server, or any subset of
// them against a NATS cluster.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(os.Args) > 1 && os.Args[1] == "chat" {
		sigs = sigs[1:] // chat takes Ctrl-C itself: it stops the running turn, never the program
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	stopProfile := cpuProfile(os.Getenv("HERALD_CPUPROFILE"))
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	stopProfile()
	os.Exit(code)
}

// cpuProfile writes a CPU profile of the whole process to path (pprof
// format, `go tool pprof`) until the returned function is called; with no
// path it does nothing. For operators measuring where a deployment's CPU
// goes, and for the benchmarks' profiles of a real `herald up` process.
func cpuProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "HERALD_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "HERALD_CPUPROFILE: %v\n", err)
		}
	}
}

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `herald — an agent runtime on NATS JetStream

Usage:
  herald run [flags] "PROMPT"     run a task and stream it (in-process when no NATS is reachable; PROMPT - reads stdin)
  herald chat [flags]             talk with the agent turn after turn in one session
  herald doctor [--json]          check the setup: NATS, ClickHouse, providers, MCP servers, sandbox
  herald up [flags]               run every service over an embedded JetStream server
  herald serve SERVICE... [flags] run services against HERALD_NATS_URL (loop gateway toolrunner compressor memory accounting api)
  herald cost [flags]             cost and token totals from ClickHouse (cost export, cost reprice: docs/COSTS.md)
  herald prices import FILE|list  import a LiteLLM or genai-prices price catalogue onto the bus; list prices
  herald sessions list|show ID|search QUERY|export ID|delete ID|prune --older-than 30d
  herald insights [--since 7d]    where time and money went: models, tools, sessions, errors
  herald status [--json]          work waiting and in flight per stream, tenant and pool; runners per pool
  herald migrate                  apply the ClickHouse schema
  herald declare                  create or update the NATS streams (needs a user allowed to)
  herald demo                     the whole system on a built-in scripted model
  herald keys create --tenant T | list | revoke ID   API keys of the HTTP api (docs/API.md)
  herald schedules add|list|pause|resume|remove   prompts run on a timetable (docs/API.md)
  herald budgets [--json]         spend against every budget window, and the alerts sent (docs/COSTS.md)
  herald version                  the version of this binary (also --version)

Run 'herald COMMAND -h' for a command's flags.
`

// Main runs the CLI and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	io := cliIO{in: stdin, out: stdout, err: stderr}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], io)
	case "chat":
		return cmdChat(ctx, args[1:], io)
	case "doctor":
		return cmdDoctor(ctx, args[1:], io)
	case "insights":
		return cmdInsights(ctx, args[1:], io)
	case "status":
		return cmdStatus(ctx, args[1:], io)
	case "up":
		return cmdUp(ctx, args[1:], io)
	case "serve":
		return cmdServe(ctx, args[1:], io)
	case "cost":
		return cmdCost(ctx, args[1:], io)
	case "sessions":
		return cmdSessions(ctx, args[1:], io)
	case "migrate":
		return cmdMigrate(ctx, args[1:], io)
	case "declare":
		return cmdDeclare(ctx, args[1:], io)
	case "demo":
		return cmdDemo(ctx, args[1:], io)
	case "keys":
		return cmdKeys(ctx, args[1:], io)
	case "schedules":
		return cmdSchedules(ctx, args[1:], io)
	case "budgets":
		return cmdBudgets(ctx, args[1:], io)
	case "prices":
		return cmdPrices(ctx, args[1:], io)
	case "--version", "version":
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "herald: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

type cliIO struct {
	in       io.Reader
	out, err io.Writer
}
