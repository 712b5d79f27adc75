package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/stretchr/testify/require"
)

// terminal runs bin/herald on a real pseudo-terminal: the test types keys
// and reads what the screen shows, as a person would.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	pty  *os.File
	out  heraldtest.SyncBuffer
	done chan error
	mark int // screen() offset the next wait starts at
}

func startTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	require.NoError(t, err)
	term := &terminal{t: t, cmd: cmd, pty: f, done: make(chan error, 1)}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&term.out, f)
		close(copied)
	}()
	go func() {
		err := cmd.Wait()
		<-copied
		term.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = f.Close()
	})
	return term
}

// ansi matches terminal control sequences (cursor moves, erases, modes).
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]`)

// screen is everything shown so far, control sequences removed.
func (term *terminal) screen() string {
	return strings.ReplaceAll(ansi.ReplaceAllString(term.out.String(), ""), "\r", "")
}

// typeKeys sends keystrokes ("\r" is Enter, "\x03" Ctrl-C, "\x04" Ctrl-D).
func (term *terminal) typeKeys(keys string) {
	term.t.Helper()
	_, err := term.pty.Write([]byte(keys))
	require.NoError(term.t, err)
}

// waitFor waits until text appears on the screen after the last thing
// waited for, and returns the screen from there.
func (term *terminal) waitFor(text string) string {
	term.t.Helper()
	var seen string
	require.Eventually(term.t, func() bool {
		seen = term.screen()[term.mark:]
		return strings.Contains(seen, text)
	}, 60*time.Second, 20*time.Millisecond, "%q never appeared; screen since the last wait:\n%s\nraw: %q", text, term.screenTail(), term.out.String())
	i := strings.Index(seen, text)
	term.mark += i + len(text)
	return seen[:i+len(text)]
}

func (term *terminal) screenTail() string {
	s := term.screen()
	if len(s) > term.mark {
		return s[term.mark:]
	}
	return ""
}

// exited waits for the program to end and returns its exit code.
func (term *terminal) exited() int {
	term.t.Helper()
	select {
	case err := <-term.done:
		return exitCode(err)
	case <-time.After(30 * time.Second):
		term.t.Fatalf("the program did not end; screen:\n%s", term.screenTail())
	}
	return -1
}

func (term *terminal) running() bool {
	select {
	case err := <-term.done:
		term.done <- err
		return false
	default:
		return true
	}
}

func chatCmd(t *testing.T, ctx context.Context, dir, modelURL string, args ...string) *exec.Cmd {
	env := map[string]string{"HERALD_BASE_URL": modelURL, "HERALD_MODEL": "m", "TERM": "xterm"}
	return heraldCmd(t, ctx, dir, env, append([]string{"chat"}, args...)...)
}

var sessionLine = regexp.MustCompile(`session (s-[0-9a-f-]{36})`)

// sessionShown is the last session id the screen named.
func sessionShown(t *testing.T, screen string) string {
	m := sessionLine.FindAllStringSubmatch(screen, -1)
	require.NotEmpty(t, m, "no session id on screen:\n%s", screen)
	return m[len(m)-1][1]
}
