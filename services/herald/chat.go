package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/loop"
	"github.com/peterh/liner"
)

// historyFile keeps the chat prompt's history under the data dir, so each
// workspace has its own.
const historyFile = "chat_history"

const chatHelp = `Type a message and press Enter; the answer streams as it is written.
  /help          this list
  /new           start a fresh session
  /resume ID     continue session ID (see /sessions; a unique start of it will do)
  /sessions      list the sessions
  /cost          what this session has cost so far
  /model NAME    use model NAME from the next turn on (no NAME: show it)
  /reasoning E   reasoning effort from the next turn on: minimal, low, medium, high, off
  /retry         send your last message again
  /exit          leave (Ctrl-D too)
Ctrl-C stops the running turn (its unfinished answer is not kept); at the prompt it clears the line.
`

// chat is one interactive session of `herald chat`: turns are tasks in one
// session, streamed by the same machinery as `herald run`.
type chat struct {
	rt    *runtime
	cfg   config.Config
	cio   cliIO
	line  *liner.State
	paste *pasteInput // nil when the input is not a terminal
	intr  chan os.Signal
	flags runFlags

	ctx        context.Context // the program's: ends on SIGTERM
	sid        string
	model      string
	lastPrompt string
}

func cmdChat(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("chat", cio.err)
	var f runFlags
	f.register(fs)
	fs.StringVar(&f.session, "session", "", "continue the session with this id")
	fs.StringVar(&f.model, "model", "", "model to use (default: HERALD_MODEL or herald.yaml)")
	fs.StringVar(&f.tenant, "tenant", "", "tenant the costs are charged to")
	fs.StringVar(&f.workspace, "workspace", "", "folder under the workspace root the tools work in")
	fs.StringVar(&f.pool, "pool", "", "tool-runner pool to run the tools on")
	fs.BoolVar(&f.yes, "yes", false, "approve dangerous commands without asking")
	f.registerContinue(fs)
	f.registerReasoning(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintln(cio.err, `herald chat takes no PROMPT: type it at the prompt (or use herald run "PROMPT")`)
		return exitUsage
	}
	if f.cont && f.session != "" || f.session != "" && !proto.IsToken(f.session) {
		fmt.Fprintln(cio.err, "herald chat: give one of --session ID (letters, digits, '-', '_') or -c/--continue")
		return exitUsage
	}
	cfg, err := f.load()
	if err != nil {
		fmt.Fprintln(cio.err, "herald chat:", err)
		return exitUsage
	}
	if f.tenant != "" {
		cfg.Tenant = f.tenant
	}
	rt, err := openRuntime(ctx, cfg, f.logger(cio.err, "warn"))
	if err != nil {
		fmt.Fprintln(cio.err, "herald chat:", err)
		return exitFail
	}
	defer rt.close()
	attachNotice(cio.err, rt, f)
	c := &chat{rt: rt, cfg: cfg, cio: cio, flags: f, sid: f.session, model: f.model}
	if f.cont {
		if c.sid, err = lastSession(ctx, rt.js, f.workspace); err != nil {
			fmt.Fprintln(cio.err, "herald chat:", err)
			return exitFail
		}
	}
	if c.sid == "" {
		c.sid = newSessionID()
	}
	return c.run(ctx)
}

func newSessionID() string { return "s-" + uuid.NewString() }

func (c *chat) run(ctx context.Context) int {
	c.paste = startPasteInput(os.Stdout)
	defer c.paste.stop(os.Stdout)
	c.line = liner.NewLiner()
	defer c.line.Close()
	c.line.SetCtrlCAborts(true)
	c.loadHistory()
	defer c.saveHistory()
	c.intr = make(chan os.Signal, 1)
	signal.Notify(c.intr, os.Interrupt)
	defer signal.Stop(c.intr)

	where := "in-process"
	if c.rt.app == nil {
		where = "NATS at " + app.RedactURL(c.cfg.NATSURL)
	}
	fmt.Fprintf(c.cio.err, "herald chat · session %s · model %s · %s · /help for commands\n", c.sid, c.modelName(), where)
	c.ctx = ctx
	for ctx.Err() == nil {
		text, err := c.readLine("› ")
		if errors.Is(err, liner.ErrPromptAborted) {
			fmt.Fprintln(c.cio.err, "(Ctrl-D or /exit leaves)")
			continue
		}
		if err != nil { // io.EOF: Ctrl-D or the end of piped input
			fmt.Fprintln(c.cio.err)
			return exitOK
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		c.line.AppendHistory(text) // a paste's newlines stay ␤: one history line
		text = strings.TrimSpace(lineText(text))
		if strings.HasPrefix(text, "/") {
			if c.command(ctx, text) {
				return exitOK
			}
			continue
		}
		c.turn(ctx, text)
	}
	return exitOK
}

// turn sends one message and streams the answer; Ctrl-C stops it.
func (c *chat) turn(ctx context.Context, prompt string) {
	c.lastPrompt = prompt
	turnCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	select { // a Ctrl-C pressed before this turn is not meant for it
	case <-c.intr:
	default:
	}
	stop := make(chan struct{})
	defer close(stop)
	stopNow := make(chan struct{}) // a second Ctrl-C: stop waiting for the interrupted turn
	go func() {
		for _, end := range []func(){cancel, func() { close(stopNow) }} {
			select {
			case <-c.intr:
				end()
			case <-stop:
				return
			}
		}
	}()
	f := c.flags
	task := proto.Task{Prompt: prompt, SessionID: c.sid, TaskID: "t-" + uuid.NewString(), Model: c.model,
		Tenant: c.cfg.Tenant, Workspace: f.workspace, Pool: f.pool, Yes: f.yes}
	task.ReasoningEffort = f.reasoning
	s := &stream{nc: c.rt.nc, js: c.rt.js, cio: c.cio, yes: f.yes, task: task, ask: c.ask, stopNow: stopNow}
	if c.paste != nil { // a terminal: a prompt the server closed can be ended
		s.abortAsk = c.abortAsk
	}
	res, err := s.run(turnCtx)
	if err != nil {
		fmt.Fprintln(c.cio.err, "error:", err)
		return
	}
	c.report(res)
}

func (c *chat) report(res proto.Result) {
	if res.ExitReason == proto.ExitInterrupted {
		fmt.Fprintln(c.cio.err, "⏹ interrupted: the unfinished answer is not kept; /retry sends your message again")
		return
	}
	u := res.Usage
	fmt.Fprintf(c.cio.err, "  — %s · %d API calls · tokens in %d out %d · %s\n",
		res.ExitReason, res.APICalls, u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens, u.OutputTokens, resultCost(res))
	if res.Error != "" {
		fmt.Fprintln(c.cio.err, "  error:", res.Error)
	}
}

// ask reads the answer to an approval or clarify prompt on the chat line.
func (c *chat) ask(prompt string) (string, bool) {
	text, err := c.readLine(prompt)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(lineText(text)), true
}

// abortAsk ends the prompt ask shows, as Ctrl-C there would.
func (c *chat) abortAsk() { c.paste.poke(ctrlC) }

const ctrlC = 3

// readLine shows prompt and reads a line; it gives up when the program is
// told to stop (SIGTERM), which a read from the terminal does not notice.
// The program then ends, so the abandoned read is never raced by another.
func (c *chat) readLine(prompt string) (string, error) {
	type line struct {
		text string
		err  error
	}
	got := make(chan line, 1)
	go func() {
		text, err := c.line.Prompt(prompt)
		got <- line{text, err}
	}()
	select {
	case l := <-got:
		return l.text, l.err
	case <-c.ctx.Done():
		return "", c.ctx.Err()
	}
}

func (c *chat) modelName() string {
	if c.model != "" {
		return c.model
	}
	if c.rt.app == nil {
		return "(the server's)" // attached: the server calls its own configured model
	}
	return c.cfg.Primary.Model
}

// command runs a slash command; it reports whether the chat should end.
func (c *chat) command(ctx context.Context, text string) bool {
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	out := c.cio.err
	switch name {
	case "/exit", "/quit":
		return true
	case "/help":
		fmt.Fprint(out, chatHelp)
	case "/new":
		c.sid, c.lastPrompt = newSessionID(), ""
		fmt.Fprintf(out, "new session %s\n", c.sid)
	case "/resume":
		c.resume(ctx, arg)
	case "/sessions":
		if err := listSessions(ctx, c.rt.js, c.cio, false); err != nil {
			fmt.Fprintln(out, "error:", err)
		}
	case "/cost":
		c.cost(ctx)
	case "/model":
		if arg != "" {
			c.model = arg
		}
		fmt.Fprintf(out, "model %s\n", c.modelName())
	case "/reasoning":
		c.setReasoning(arg)
	case "/retry":
		if c.lastPrompt == "" {
			fmt.Fprintln(out, "nothing to retry yet")
			return false
		}
		fmt.Fprintf(out, "retrying: %s\n", shorten(c.lastPrompt, 80))
		c.turn(ctx, c.lastPrompt)
	default:
		fmt.Fprintf(out, "unknown command %s; /help lists them\n", name)
	}
	return false
}

func (c *chat) resume(ctx context.Context, id string) {
	out := c.cio.err
	if id == "" || !proto.IsToken(id) {
		fmt.Fprintln(out, "usage: /resume ID (see /sessions; a unique start of the id will do)")
		return
	}
	id, err := c.sessionByPrefix(ctx, id)
	if err != nil {
		fmt.Fprintln(out, err)
		return
	}
	st, err := loop.LoadSession(ctx, c.rt.js, id)
	if errors.Is(err, loop.ErrNoSession) {
		fmt.Fprintf(out, "no session %s (see /sessions)\n", id)
		return
	}
	if err != nil {
		fmt.Fprintln(out, "error:", err)
		return
	}
	c.sid, c.lastPrompt = id, ""
	fmt.Fprintf(out, "resumed session %s · %d turns · model %s · %s so far\n", id, st.Turn, st.Model, sessionCost(st.SessionCostUSD, st.SessionUnpriced))
}

// sessionByPrefix is the session whose id is prefix or, failing that, the
// one session whose id starts with it.
func (c *chat) sessionByPrefix(ctx context.Context, prefix string) (string, error) {
	states, err := loop.ListSessions(ctx, c.rt.js)
	if err != nil {
		return "", fmt.Errorf("error: %w", err)
	}
	var found []string
	for _, st := range states {
		if st.SessionID == prefix {
			return prefix, nil
		}
		if strings.HasPrefix(st.SessionID, prefix) {
			found = append(found, st.SessionID)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no session %s (see /sessions)", prefix)
	case 1:
		return found[0], nil
	}
	n := len(found)
	slices.Sort(found)
	if n > 5 {
		found = append(found[:5], "…")
	}
	return "", fmt.Errorf("%s is the start of %d sessions: %s; type more of the id", prefix, n, strings.Join(found, ", "))
}

func (c *chat) cost(ctx context.Context) {
	st, err := loop.LoadSession(ctx, c.rt.js, c.sid)
	switch {
	case errors.Is(err, loop.ErrNoSession):
		fmt.Fprintf(c.cio.err, "session %s: $0.000000 so far (no turn yet)\n", c.sid)
	case err != nil:
		fmt.Fprintln(c.cio.err, "error:", err)
	default:
		fmt.Fprintf(c.cio.err, "session %s: %s so far over %d turns\n", c.sid, sessionCost(st.SessionCostUSD, st.SessionUnpriced), st.Turn)
	}
}

func (c *chat) historyPath() string { return filepath.Join(c.cfg.DataDir, historyFile) }

func (c *chat) loadHistory() {
	f, err := os.Open(c.historyPath())
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = c.line.ReadHistory(f)
}

func (c *chat) saveHistory() {
	if err := os.MkdirAll(c.cfg.DataDir, 0o755); err != nil {
		return
	}
	f, err := os.OpenFile(c.historyPath(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = c.line.WriteHistory(f)
}
