package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

type runFlags struct {
	common
	session, model, tenant, workspace, pool string
	maxIterations                           int
	maxCost                                 float64
	json, yes                               bool
}

func cmdRun(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("run", cio.err)
	var f runFlags
	f.register(fs)
	fs.StringVar(&f.session, "session", "", "continue the session with this id")
	fs.StringVar(&f.model, "model", "", "model to use (default: HERALD_MODEL or herald.yaml)")
	fs.IntVar(&f.maxIterations, "max-iterations", 0, "maximum model calls for this task (default: agent.max_turns, 90)")
	fs.StringVar(&f.tenant, "tenant", "", "tenant the costs are charged to")
	fs.StringVar(&f.workspace, "workspace", "", "folder under the workspace root the tools work in")
	fs.StringVar(&f.pool, "pool", "", "tool-runner pool to run the tools on")
	fs.Float64Var(&f.maxCost, "max-cost", 0, "stop the task when it has cost this many USD")
	fs.BoolVar(&f.json, "json", false, "print the result JSON only")
	fs.BoolVar(&f.yes, "yes", false, "approve dangerous commands without asking")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		fmt.Fprintln(cio.err, `herald run: give exactly one PROMPT, e.g. herald run "list the files here"`)
		return exitUsage
	}
	if f.session != "" && !proto.IsToken(f.session) {
		fmt.Fprintf(cio.err, "herald run: --session may hold only letters, digits, '-' and '_' (got %q)\n", f.session)
		return exitUsage
	}
	cfg, err := f.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald run:", err)
		return exitUsage
	}
	if f.model != "" {
		cfg.Primary.Model = f.model
	}
	if f.tenant != "" {
		cfg.Tenant = f.tenant
	}
	task := proto.Task{Prompt: pos[0], SessionID: f.session, TaskID: "t-" + uuid.NewString(), Model: f.model,
		MaxIterations: f.maxIterations, MaxCostUSD: f.maxCost, Tenant: cfg.Tenant, Workspace: f.workspace,
		Pool: f.pool, Yes: f.yes}
	if task.SessionID == "" {
		task.SessionID = "s-" + uuid.NewString()
	}
	if err := task.Validate(); err != nil {
		fmt.Fprintln(cio.err, "herald run:", err)
		return exitUsage
	}
	log := f.logger(cio.err, "warn")
	res, err := runTask(ctx, cfg, log, task, cio, f.json, f.yes)
	if err != nil {
		fmt.Fprintln(cio.err, "herald run:", err)
		return exitFail
	}
	return reportResult(res, cio, f.json)
}

func flagExit(err error) int {
	if usageError(err) {
		return exitUsage
	}
	return exitOK
}

// runTask submits task to the NATS at HERALD_NATS_URL, or, when none
// answers, to a whole Herald started in this process for the task's length.
func runTask(ctx context.Context, cfg config.Config, log zerolog.Logger, task proto.Task, cio cliIO, jsonOut, yes bool) (proto.Result, error) {
	nc, err := nats.Connect(cfg.NATSURL, nats.Timeout(time.Second), nats.Name("herald-run"), app.InboxOption(cfg))
	var a *app.App
	if err != nil {
		if a, err = startInProcess(ctx, cfg, log); err != nil {
			return proto.Result{}, err
		}
		defer a.Shutdown(context.Background())
		nc = a.NC
	} else {
		defer nc.Close()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return proto.Result{}, err
	}
	if a == nil {
		if err := remoteReady(ctx, cfg, js, log); err != nil {
			return proto.Result{}, fmt.Errorf("NATS at %s has no usable JetStream: %w", app.RedactURL(cfg.NATSURL), err)
		}
	}
	s := &stream{nc: nc, js: js, cio: cio, quiet: jsonOut, yes: yes, task: task}
	return s.run(ctx)
}

// remoteReady waits until a remote server has the streams a task and its
// result travel on. Submitting needs nothing more, so a server declared by
// another Herald version is used as it is; one without them is declared (or
// waited for) as a service would.
func remoteReady(ctx context.Context, cfg config.Config, js jetstream.JetStream, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if bus.CheckExists(ctx, js, bus.StreamTasks, bus.StreamSessions, bus.StreamEvents, bus.StreamControl) == nil {
		return nil
	}
	return bus.WaitReady(ctx, js, cfg.Replicas, cfg.NATSDeclare != "check", log)
}

// startInProcess runs every service over an embedded server whose store is
// under the data dir, so sessions can be continued with --session.
func startInProcess(ctx context.Context, cfg config.Config, log zerolog.Logger) (*app.App, error) {
	if os.Getenv("HERALD_WORKSPACE") == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		cfg.Workspace = cwd
	}
	store := filepath.Join(cfg.DataDir, "nats")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	a, err := app.Start(ctx, app.Options{Config: cfg, StoreDir: store, Log: log, Instance: "run"})
	if err != nil {
		return nil, fmt.Errorf("starting Herald in-process: %w", err)
	}
	return a, nil
}

func reportResult(res proto.Result, cio cliIO, jsonOut bool) int {
	if jsonOut {
		data, _ := json.Marshal(res)
		fmt.Fprintln(cio.out, string(data))
	} else {
		u := res.Usage
		fmt.Fprintf(cio.err, "\n— %s · %d API calls · %d iterations · tokens in %d (cached %d) out %d · $%.6f\n",
			res.ExitReason, res.APICalls, res.Iterations, u.InputTokens, u.CacheReadTokens, u.OutputTokens, res.CostUSD)
		if res.Error != "" {
			fmt.Fprintln(cio.err, "error:", res.Error)
		}
		fmt.Fprintf(cio.err, "session %s (continue with: herald run --session %s \"...\")\n", res.SessionID, res.SessionID)
	}
	if res.ExitReason == proto.ExitTextResponse {
		return exitOK
	}
	return exitFail
}
