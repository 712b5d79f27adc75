package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// demoModel is priced in the demo's configuration so the cost table shows
// real arithmetic on the tokens the scripted model reports.
const demoModel = "herald-demo"

const demoPrompt = "Write a short greeting to hello.txt, read it back, and tell me what it says."

func cmdDemo(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("demo", cio.err)
	var c common
	c.register(fs)
	keep := fs.Bool("keep", false, "keep the demo's data folder (workspace, streams, ClickHouse)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	cfg, err := c.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald demo:", err)
		return exitUsage
	}
	if err := runDemo(ctx, cfg, c, cio, *keep); err != nil {
		fmt.Fprintln(cio.err, "herald demo:", err)
		return exitFail
	}
	return exitOK
}

// demoProgram is a program `herald demo` starts; without a required one
// the demo cannot run, without an optional one it runs with less.
type demoProgram struct {
	name, debianPackage, why string
	required                 bool
}

// demoPrograms are the programs the demo starts with cfg: the tool runner's
// sandbox, and a private ClickHouse when no DSN is set. scripts/setup.sh
// (make demo) installs this list; TestSetupInstallsWhatTheDemoStarts keeps
// the two equal.
func demoPrograms(cfg config.Config) []demoProgram {
	var out []demoProgram
	if cfg.Sandbox.Mode != config.SandboxNone {
		out = append(out, demoProgram{"bwrap", "bubblewrap", "the tool runner's sandbox", true})
	}
	if cfg.ClickHouseDSN == "" {
		out = append(out, demoProgram{"clickhouse-server", "clickhouse-server", "cost accounting", false})
	}
	return out
}

// missingDemoProgram says which required program is not installed.
func missingDemoProgram(cfg config.Config) error {
	for _, p := range demoPrograms(cfg) {
		if _, err := exec.LookPath(p.name); err != nil && p.required {
			return fmt.Errorf("the demo needs %s (%s, Debian package %s): run scripts/setup.sh (make demo does)", p.name, p.why, p.debianPackage)
		}
	}
	return nil
}

func runDemo(ctx context.Context, cfg config.Config, c common, cio cliIO, keep bool) error {
	log := c.logger(cio.err, "warn")
	if err := missingDemoProgram(cfg); err != nil {
		return err
	}
	model, err := scripted.Start(scripted.Demo())
	if err != nil {
		return err
	}
	defer model.Close()
	dir, err := os.MkdirTemp("", "herald-demo-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(cio.err, "demo data kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	cfg.DataDir, cfg.Workspace, cfg.Tenant = dir, filepath.Join(dir, "workspace"), "demo"
	if err := absPaths(&cfg); err != nil { // the temporary folder may be reached through a symlink
		return err
	}
	cfg.Primary = config.Provider{Provider: "openai", Model: demoModel, BaseURL: model.URL}
	cfg.FallbackProviders = nil
	cfg.Pricing = map[string]config.Price{demoModel: {Input: 2.5, Output: 10, CacheRead: 1.25}}
	if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
		return err
	}
	fmt.Fprintln(cio.err, "Herald demo — a scripted model (no API key, no network) drives real services over embedded NATS JetStream.")
	ch, err := demoClickHouse(ctx, &cfg.ClickHouseDSN, dir, log)
	if err != nil {
		return err
	}
	defer ch.stop()
	a, err := app.Start(ctx, app.Options{Config: cfg, StoreDir: filepath.Join(dir, "nats"), Log: log, Instance: "demo", SizeProcessors: true})
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background())
	js, err := jetstream.New(a.NC)
	if err != nil {
		return err
	}
	task := proto.Task{Prompt: demoPrompt, SessionID: "demo-" + uuid.NewString()[:8], TaskID: "t-" + uuid.NewString(), Tenant: "demo"}
	fmt.Fprintf(cio.out, "\n> %s\n\n", demoPrompt)
	s := &stream{nc: a.NC, js: js, cio: cio, task: task}
	res, err := s.run(ctx)
	if err != nil {
		return err
	}
	hint := "the demo's data is deleted when it ends; herald demo --keep keeps it"
	if keep {
		hint = fmt.Sprintf("continue with: HERALD_DATA_DIR=%s HERALD_WORKSPACE=%s herald run --tenant demo --session %s \"...\" (with a real model)",
			dir, cfg.Workspace, res.SessionID)
	}
	reportResultHint(res, cio, false, hint)
	if res.ExitReason != proto.ExitTextResponse {
		return fmt.Errorf("the demo task ended with %s", res.ExitReason)
	}
	if data, err := os.ReadFile(filepath.Join(cfg.Workspace, "hello.txt")); err == nil {
		fmt.Fprintf(cio.out, "\nhello.txt in the workspace now holds:\n%s", data)
	}
	return printDemoCost(ctx, cfg.ClickHouseDSN, ch.l != nil, res, cio)
}

// demoClickHouse starts a ClickHouse of the demo's own under dir when no DSN
// is set. Never the user's private one: that would keep the demo's made-up
// costs with the user's, and recording a folder the demo deletes would send
// every later herald cost and run to it.
func demoClickHouse(ctx context.Context, dsn *string, dir string, log zerolog.Logger) (localCH, error) {
	if *dsn != "" {
		return localCH{}, nil
	}
	l, err := accounting.StartLocalClickHouse(ctx, filepath.Join(dir, "clickhouse"), log)
	if errors.Is(err, accounting.ErrNoClickHouse) {
		return localCH{}, nil
	}
	if err != nil {
		return localCH{}, fmt.Errorf("the demo's ClickHouse: %w", err)
	}
	*dsn = l.DSN()
	return localCH{l: l}, nil
}

// printDemoCost waits until every model call of the run is in ClickHouse,
// then prints the cost table read back from it. own says the ClickHouse is
// the demo's, gone with its data.
func printDemoCost(ctx context.Context, dsn string, own bool, res proto.Result, cio cliIO) error {
	if dsn == "" {
		fmt.Fprintln(cio.out, "\nNo ClickHouse here (install clickhouse-server or set HERALD_CLICKHOUSE_DSN): usage events wait in the USAGE stream.")
		return nil
	}
	q := accounting.CostQuery{By: "model", Session: res.SessionID}
	deadline := time.Now().Add(60 * time.Second)
	for {
		rep, err := accounting.QueryCost(ctx, dsn, q)
		if err == nil && rep.Total.Calls >= uint64(res.APICalls) {
			fmt.Fprintln(cio.out, demoCostTitle(own))
			return rep.WriteTable(cio.out)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("usage did not reach ClickHouse within 60s (last error: %v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func demoCostTitle(own bool) string {
	if own {
		return "\nCost of this run, read back from the demo's own ClickHouse " +
			"(herald cost --by model prints this table for your own runs; the demo's costs stay out of it):"
	}
	return "\nCost of this run, read back from ClickHouse (herald cost --by model):"
}
