package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/loop"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

type runFlags struct {
	common
	session, model, tenant, workspace, pool string
	reasoning                               string
	maxIterations                           int
	maxCost                                 float64
	json, yes, cont                         bool
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
	f.registerContinue(fs)
	f.registerReasoning(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 1 && pos[0] == "-" { // the prompt from stdin: herald run - < task.md
		data, err := io.ReadAll(cio.in)
		if err != nil {
			fmt.Fprintln(cio.err, "herald run: reading the prompt from stdin:", err)
			return exitFail
		}
		pos[0] = strings.TrimSpace(string(data))
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		fmt.Fprintln(cio.err, `herald run: give exactly one PROMPT, e.g. herald run "list the files here"`)
		return exitUsage
	}
	if f.session != "" && !proto.IsToken(f.session) {
		fmt.Fprintf(cio.err, "herald run: --session may hold only letters, digits, '-' and '_' (got %q)\n", f.session)
		return exitUsage
	}
	if f.cont && f.session != "" {
		fmt.Fprintln(cio.err, "herald run: give --session ID or -c/--continue, not both")
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
		Pool: f.pool, Yes: f.yes, ReasoningEffort: f.reasoning}
	if task.SessionID == "" {
		task.SessionID = "s-" + uuid.NewString()
	}
	if err := task.Validate(); err != nil {
		fmt.Fprintln(cio.err, "herald run:", err)
		return exitUsage
	}
	log := f.logger(cio.err, "warn")
	stops := watchStops()
	defer stops.stop()
	res, err := runTask(ctx, cfg, log, task, cio, f, stops.second)
	if err != nil {
		fmt.Fprintln(cio.err, "herald run:", err)
		return exitFail
	}
	return reportResult(res, cio, f.json)
}

// registerContinue adds -c/--continue: the last session in this workspace.
func (f *runFlags) registerContinue(fs *flag.FlagSet) {
	const doc = "continue the last session in this workspace"
	fs.BoolVar(&f.cont, "c", false, doc)
	fs.BoolVar(&f.cont, "continue", false, doc)
}

func flagExit(err error) int {
	if usageError(err) {
		return exitUsage
	}
	return exitOK
}

// runTask submits task to the NATS at HERALD_NATS_URL, or, when none
// answers, to a whole Herald started in this process for the task's length.
// continueLast puts the task in the workspace's most recent session;
// stopNow (a second Ctrl-C) ends the wait for an interrupted turn, and an
// in-process Herald's drain, at once.
func runTask(ctx context.Context, cfg config.Config, log zerolog.Logger, task proto.Task, cio cliIO, f runFlags, stopNow <-chan struct{}) (proto.Result, error) {
	jsonOut, yes, continueLast := f.json, f.yes, f.cont
	rt, err := openRuntime(ctx, cfg, log)
	if err != nil {
		return proto.Result{}, err
	}
	rt.stopNow = stopNow
	defer rt.close()
	attachNotice(cio.err, rt, f)
	if continueLast {
		if task.SessionID, err = lastSession(ctx, rt.js, task.Workspace); err != nil {
			return proto.Result{}, err
		}
	}
	s := &stream{nc: rt.nc, js: rt.js, cio: cio, quiet: jsonOut, yes: yes, task: task, stopNow: stopNow}
	return s.run(ctx)
}

// runtime is the bus a command submits to: a remote NATS, or a whole Herald
// started in this process when none answers.
type runtime struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	app *app.App // nil when remote
	// url is the remote server's (attached); lock is held while in-process.
	url  string
	lock *dataLock
	// holder is the running Herald of this data folder, when attached to it.
	holder *lockHolder
	// stopCH stops the private ClickHouse this run started (privatech.go).
	stopCH func()
	// stopNow, when closed, cuts the in-process Herald's drain short.
	stopNow <-chan struct{}
}

// openRuntime attaches to the Herald at HERALD_NATS_URL, else to the one
// holding this data folder when it listens, else starts Herald in-process
// on the folder; a folder held by a process that does not listen stops
// here, naming it (never two servers on one store).
func openRuntime(ctx context.Context, cfg config.Config, log zerolog.Logger) (*runtime, error) {
	nc, err := nats.Connect(cfg.NATSURL, nats.Timeout(time.Second), nats.Name("herald-run"), app.InboxOption(cfg))
	rt := &runtime{nc: nc, url: cfg.NATSURL}
	if err != nil {
		lock, lerr := lockDataDir(cfg.DataDir, lockHolder{Workspace: cfg.WorkspaceRoot()})
		var busy *errDataDirBusy
		switch {
		case errors.As(lerr, &busy) && busy.holder.NATS != "":
			if rt.nc, err = nats.Connect(busy.holder.NATS, nats.Timeout(time.Second), nats.Name("herald-run"), app.InboxOption(cfg)); err != nil {
				return nil, fmt.Errorf("%w; its NATS at %s does not answer: %v", lerr, busy.holder.NATS, err)
			}
			rt.url, rt.holder = busy.holder.NATS, &busy.holder
		case lerr != nil:
			return nil, lerr
		default:
			rt.lock = lock
			rt.stopCH = laptopClickHouse(ctx, &cfg, log)
			if rt.app, err = startInProcess(ctx, cfg, log); err != nil {
				rt.stopCH()
				lock.release()
				return nil, err
			}
			rt.nc = rt.app.NC
		}
	} else if h, ok := folderHolder(cfg.DataDir); ok && h.NATS == nc.ConnectedUrl() {
		rt.holder = &h
	}
	if rt.js, err = jetstream.New(rt.nc); err != nil {
		rt.close()
		return nil, err
	}
	if rt.app == nil {
		if err := heraldListens(ctx, rt.js, rt.url); err != nil {
			rt.close()
			return nil, err
		}
		if err := remoteReady(ctx, cfg, rt.js, log); err != nil {
			rt.close()
			return nil, fmt.Errorf("NATS at %s has no usable JetStream: %w", app.RedactURL(cfg.NATSURL), err)
		}
	}
	return rt, nil
}

// runDrain bounds how long an in-process Herald waits, after the answer,
// for work still in flight (usage rows, memory) before it stops: what is
// not done is redelivered the next time the folder's Herald runs.
const runDrain = 5 * time.Second

func (rt *runtime) close() {
	if rt.app != nil {
		ctx, cancel := context.WithTimeout(context.Background(), runDrain)
		go func() {
			select {
			case <-rt.stopNow:
				cancel()
			case <-ctx.Done():
			}
		}()
		rt.app.Shutdown(ctx)
		cancel()
		rt.stopCH()
		rt.lock.release()
		return
	}
	rt.nc.Close()
}

// errNothingToContinue says -c found no earlier session.
var errNothingToContinue = errors.New("no earlier session in this workspace to continue (start one without -c)")

// lastSession is the most recently started top-level session of workspace
// (a task's workspace folder; "" is the root), for -c/--continue.
func lastSession(ctx context.Context, js jetstream.JetStream, workspace string) (string, error) {
	states, err := loop.ListSessions(ctx, js)
	if err != nil {
		return "", err
	}
	for _, st := range states { // most recent first
		if st.ParentSessionID == "" && st.Workspace == workspace {
			return st.SessionID, nil
		}
	}
	return "", errNothingToContinue
}

// loopWait is how long a server is given for a Herald that starts with the
// command (herald up in another terminal) to declare its loop.
const loopWait = 3 * time.Second

// errNoHerald says the NATS that answered has no Herald loop to run a task.
var errNoHerald = errors.New("no Herald runs there")

// heraldListens checks that a Herald loop takes tasks on the server before
// anything is declared or published there: a task sent to some other NATS
// would wait for its result forever. A user not allowed to look (a cluster's
// restricted client, whose request goes unanswered) cannot tell, and goes
// on as before after a second.
func heraldListens(ctx context.Context, js jetstream.JetStream, url string) error {
	ctx, cancel := context.WithTimeout(ctx, loopWait)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		_, err := js.Consumer(actx, bus.StreamTasks, bus.LoopTasksConsumer)
		acancel()
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrConsumerNotFound):
			return nil
		}
		select {
		case <-ctx.Done():
			return noHeraldError(url, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// noHeraldError says what the server at url lacks, and what to do.
func noHeraldError(url string, err error) error {
	found := "no stream " + bus.StreamTasks + " (no Herald has run on it)"
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		found = "stream " + bus.StreamTasks + " but not the loop's consumer " + bus.LoopTasksConsumer + " (no herald up or herald serve loop has run on it)"
	}
	return fmt.Errorf("the NATS at %s answers, but %w: it has %s. Start Herald on it (herald up, or herald serve loop gateway toolrunner), "+
		"point HERALD_NATS_URL at the NATS your Herald uses, or at a free address (e.g. nats://127.0.0.1:4299) to run Herald in this process",
		app.RedactURL(url), errNoHerald, found)
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
		cwd, err := workingDir()
		if err != nil {
			return nil, err
		}
		cfg.Workspace = cwd
	}
	store := filepath.Join(cfg.DataDir, "nats")
	if err := os.MkdirAll(store, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	a, err := app.Start(ctx, app.Options{Config: cfg, StoreDir: store, Log: log, Instance: "run", SizeProcessors: true})
	if err != nil {
		return nil, fmt.Errorf("starting Herald in-process: %w", err)
	}
	return a, nil
}

func reportResult(res proto.Result, cio cliIO, jsonOut bool) int {
	return reportResultHint(res, cio, jsonOut, fmt.Sprintf("continue with: herald run --session %s \"...\"", res.SessionID))
}

// reportResultHint is reportResult with hint said after the session id.
func reportResultHint(res proto.Result, cio cliIO, jsonOut bool, hint string) int {
	if jsonOut {
		data, _ := json.Marshal(res)
		fmt.Fprintln(cio.out, string(data))
	} else {
		u := res.Usage
		reasoning := ""
		if u.ReasoningTokens > 0 {
			reasoning = fmt.Sprintf(" (reasoning %d)", u.ReasoningTokens)
		}
		fmt.Fprintf(cio.err, "\n— %s · %s · %s · tokens in %d (cached %d) out %d%s · %s\n",
			res.ExitReason, count(res.APICalls, "API call"), count(res.Iterations, "iteration"), u.InputTokens, u.CacheReadTokens, u.OutputTokens, reasoning, resultCost(res))
		if res.Error != "" && !strings.Contains(res.FinalResponse, strings.TrimSpace(res.Error)) { // said once
			fmt.Fprintln(cio.err, "error:", res.Error)
		}
		fmt.Fprintf(cio.err, "session %s (%s)\n", res.SessionID, hint)
	}
	if res.ExitReason == proto.ExitTextResponse {
		return exitOK
	}
	return exitFail
}

// count is "1 iteration", "2 iterations".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
