package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// chatScript answers by what the person last typed; a plain message is
// answered with how many answers the session already holds, so a test sees
// on the screen whether turns share one session.
func chatScript(r *scripted.Request) scripted.Reply {
	last := r.LastMessage()
	if last.Role == "tool" {
		return scripted.Reply{Content: "Done with the tool.", ChunkChars: 4}
	}
	// The newest message is the last paragraph: the loop merges a message
	// into an interrupted turn's, which has no answer.
	text := last.Text()
	if i := strings.LastIndex(text, "\n\n"); i >= 0 {
		text = text[i+2:]
	}
	switch {
	case strings.Contains(text, "slow"):
		return scripted.Reply{Content: "too late", Delay: time.Minute}
	case strings.Contains(text, "write"):
		return scripted.Tool("write_file", `{"path":"note.txt","content":"from chat\n"}`)
	case strings.Contains(text, "clean"):
		return scripted.Tool("terminal", `{"command":"rm -rf build"}`)
	case strings.Contains(text, "pick"):
		return scripted.Tool("clarify", `{"question":"Which colour?","choices":["red","green"]}`)
	}
	return scripted.Reply{Content: fmt.Sprintf("Hello! This session held %d answers before this one.", r.AssistantCount()), ChunkChars: 5}
}

// Many turns in one session, streamed with tool progress, and the slash
// commands that move between sessions and models, typed on a real terminal.
func TestChatTurnsShareASessionAndSlashCommandsWork(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	term := startTerminal(t, chatCmd(t, ctx, dir, model.URL))
	greeting := term.waitFor("/help for commands")
	require.Contains(t, greeting, "in-process", "no NATS is reachable, so chat runs Herald in-process")
	first := sessionShown(t, greeting)

	term.typeKeys("hello\r")
	term.waitFor("held 0 answers before this one.")
	term.waitFor("text_response")
	term.typeKeys("hello again\r")
	term.waitFor("held 1 answers before this one.")

	term.typeKeys("please write the note\r")
	progress := term.waitFor("Done with the tool.")
	require.Contains(t, progress, "⚙ write_file", "tool progress is shown as herald run shows it")
	data, err := os.ReadFile(filepath.Join(dir, "note.txt"))
	require.NoError(t, err, "the tool ran in the current directory")
	require.Equal(t, "from chat\n", string(data))

	term.typeKeys("/retry\r")
	term.waitFor("retrying: please write the note")
	term.waitFor("Done with the tool.")

	term.typeKeys("/model other-model\r")
	term.waitFor("model other-model")
	term.typeKeys("hello with the other model\r")
	term.waitFor("held 6 answers before this one.")
	reqs := model.Requests()
	require.Equal(t, "other-model", reqs[len(reqs)-1].Model, "/model changes the model of the next turns")

	term.typeKeys("/cost\r")
	term.waitFor("so far over 5 turns")

	term.typeKeys("/new\r")
	second := sessionShown(t, term.waitFor("new session s-")+term.waitFor("\n"))
	require.NotEqual(t, first, second)
	term.typeKeys("hello\r")
	term.waitFor("held 0 answers before this one.")

	term.typeKeys("/sessions\r")
	listed := term.waitFor(second[:12])
	require.Contains(t, listed, "SESSION")
	term.typeKeys("/resume no-such-session\r")
	term.waitFor("no session no-such-session")
	term.typeKeys("/resume " + first + "\r")
	term.waitFor("resumed session " + first + " · 5 turns")
	term.typeKeys("hello\r")
	term.waitFor("held 7 answers before this one.")

	term.typeKeys("/bogus\r")
	term.waitFor("unknown command /bogus")
	term.typeKeys("/help\r")
	term.waitFor("/resume ID")
	term.typeKeys("/exit\r")
	require.Equal(t, 0, term.exited())
}

// Ctrl-C during a turn stops that turn, keeps none of its answer and leaves
// the program at the prompt; at the prompt it clears the line; Ctrl-D leaves.
func TestChatCtrlCStopsTheTurnNotTheProgram(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	term := startTerminal(t, chatCmd(t, ctx, t.TempDir(), model.URL))
	term.waitFor("/help for commands")

	term.typeKeys("hello\r")
	term.waitFor("held 0 answers")
	term.typeKeys("a slow question\r")
	require.Eventually(t, func() bool { return model.Calls() == 2 }, time.Minute, 10*time.Millisecond, "the slow model call started")
	start := time.Now()
	term.typeKeys("\x03")
	term.waitFor("interrupted: the unfinished answer is not kept")
	t.Logf("Ctrl-C to the turn's end on screen: %s", time.Since(start).Round(time.Millisecond))
	require.Less(t, time.Since(start), 15*time.Second)
	require.True(t, term.running(), "Ctrl-C stops the turn, never the program")

	term.typeKeys("hello\r")
	term.waitFor("held 1 answers before this one.")
	last := model.Requests()[model.Calls()-1]
	for _, m := range last.Messages {
		require.NotContains(t, m.Text(), "too late", "the interrupted answer is not in the session")
	}

	term.typeKeys("\x1b[A") // arrow up: the last line typed comes back
	require.Eventually(t, func() bool { return strings.HasSuffix(strings.TrimRight(term.screen(), " "), "› hello") },
		10*time.Second, 20*time.Millisecond, "history recalls the last line; screen:\n%s", term.screenTail())
	term.typeKeys("\x03")
	term.waitFor("(Ctrl-D or /exit leaves)")
	require.True(t, term.running())
	term.typeKeys("\x04")
	require.Equal(t, 0, term.exited())
	history, err := os.ReadFile(filepath.Join(term.cmd.Dir, ".herald", "chat_history"))
	require.NoError(t, err, "the prompt history is kept for the next chat")
	require.Contains(t, string(history), "a slow question")
}

// A dangerous command and a clarify question are asked on the chat line;
// the answers typed there decide.
func TestChatAsksApprovalAndClarifyInline(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "build", "out.o"), "x")
	term := startTerminal(t, chatCmd(t, ctx, dir, model.URL))
	term.waitFor("/help for commands")
	term.typeKeys("clean the build\r")
	asked := term.waitFor("Allow it? [y/N]")
	require.Contains(t, asked, "rm -rf build")
	term.typeKeys("n\r")
	term.waitFor("Done with the tool.")
	require.DirExists(t, filepath.Join(dir, "build"), "denied: the command did not run")

	term.typeKeys("clean the build again\r")
	term.waitFor("Allow it? [y/N]")
	term.typeKeys("y\r")
	term.waitFor("Done with the tool.")
	require.NoDirExists(t, filepath.Join(dir, "build"), "approved: the command ran")

	term.typeKeys("pick a colour\r")
	asked = term.waitFor("2) green")
	require.Contains(t, asked, "Which colour?")
	term.typeKeys("2\r")
	term.waitFor("Done with the tool.")
	reqs := model.Requests()
	require.Contains(t, reqs[len(reqs)-1].LastMessage().Text(), "green", "the chosen answer reached the model")
	term.waitFor("› ")
	require.NoError(t, term.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, term.exited(), "SIGTERM ends a chat waiting at the prompt")
}

// With its input piped instead of typed, chat reads one message a line and
// ends at the end of the input.
func TestChatReadsPipedInput(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out heraldtest.SyncBuffer
	dir := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "gpt-4o-mini"}
	cmd := heraldCmd(t, ctx, dir, env, "chat")
	cmd.Stdin = strings.NewReader("hello\nhello again\n/cost\n")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), out.String())
	require.Contains(t, out.String(), "held 0 answers before this one.")
	require.Contains(t, out.String(), "held 1 answers before this one.")
	cost := regexp.MustCompile(`\$([0-9.]+) so far over 2 turns`).FindStringSubmatch(out.String())
	require.NotNil(t, cost, out.String())
	require.NotEqual(t, "0.000000", cost[1], "gpt-4o-mini is priced: /cost shows what the two turns cost")
	first := sessionShown(t, out.String())

	var again heraldtest.SyncBuffer
	cmd = heraldCmd(t, ctx, dir, env, "chat", "-c")
	cmd.Stdin = strings.NewReader("and once more\n")
	cmd.Stdout, cmd.Stderr = &again, &again
	require.NoError(t, cmd.Run(), again.String())
	require.Equal(t, first, sessionShown(t, again.String()), "chat -c continues the last session here")
	require.Contains(t, again.String(), "held 2 answers before this one.")
}

// Where a NATS answers, chat submits its turns there instead of starting
// Herald itself: here to a running `herald up`.
func TestChatUsesARunningHerald(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	// cancelled after herald up's own cleanup (cleanups run last first):
	// a cancel at return would kill it before it stops the private
	// ClickHouse it started in data, which then still writes there
	t.Cleanup(cancel)
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	data := t.TempDir()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "m", "HERALD_NATS_URL": url}
	var upErr heraldtest.SyncBuffer
	up := heraldCmd(t, ctx, data, env, "up", "--nats-listen", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", data, "--http", "")
	up.Stderr = &upErr
	require.NoError(t, up.Start())
	t.Cleanup(func() { _ = up.Process.Signal(os.Interrupt); _ = up.Wait() })
	require.Eventually(t, func() bool {
		out, code := runHerald(t, env, "sessions", "list")
		return code == 0 && strings.Contains(out, "SESSION")
	}, 60*time.Second, 100*time.Millisecond, "herald up never served")

	cmd := heraldCmd(t, ctx, t.TempDir(), map[string]string{"HERALD_NATS_URL": url, "TERM": "xterm"}, "chat")
	term := startTerminal(t, cmd)
	require.Contains(t, term.waitFor("/help for commands"), "NATS at "+url)
	term.typeKeys("please write the note\r")
	term.waitFor("Done with the tool.")
	require.FileExists(t, filepath.Join(data, "workspace", "note.txt"), "herald up's tool runner did the work")
	term.typeKeys("/exit\r")
	require.Equal(t, 0, term.exited())
}
