package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// userTexts are the user messages of a model request, in order.
func userTexts(r *scripted.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			out = append(out, m.Text())
		}
	}
	return out
}

// A turn the provider refuses, and a turn stopped with Ctrl-C, leave nothing
// behind: the next message reaches the model as typed, alone, not glued to
// the prompt that failed.
func TestChatFailedOrInterruptedTurnLeavesNothingInTheNextMessage(t *testing.T) {
	var failed atomic.Bool
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		text := r.LastMessage().Text()
		if strings.Contains(text, "doomed") && failed.CompareAndSwap(false, true) {
			return scripted.Reply{Status: 400, Body: `{"error":{"message":"this request was refused","type":"invalid_request_error"}}`}
		}
		return chatScript(r)
	})
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	term := startTerminal(t, chatCmd(t, ctx, t.TempDir(), model.URL))
	term.waitFor("/help for commands")

	term.typeKeys("hello\r")
	term.waitFor("held 0 answers before this one.")
	term.typeKeys("a doomed prompt\r")
	term.waitFor("— failed")
	term.typeKeys("what next\r")
	term.waitFor("held 1 answers before this one.")
	last := model.Requests()[model.Calls()-1]
	require.Equal(t, []string{"hello", "what next"}, userTexts(last), "the failed prompt is not part of the next message")

	term.typeKeys("a slow question\r")
	calls := model.Calls()
	require.Eventually(t, func() bool { return model.Calls() == calls+1 }, time.Minute, 10*time.Millisecond)
	term.typeKeys("\x03")
	term.waitFor("interrupted: the unfinished answer is not kept")
	term.typeKeys("and now\r")
	term.waitFor("held 2 answers before this one.")
	last = model.Requests()[model.Calls()-1]
	require.Equal(t, []string{"hello", "what next", "and now"}, userTexts(last), "the interrupted prompt is not part of the next message")

	term.typeKeys("/retry\r")
	term.waitFor("retrying: and now")
	term.waitFor("held 3 answers before this one.")
	term.typeKeys("/exit\r")
	require.Equal(t, 0, term.exited())
}

// Lines pasted at once (bracketed paste, as terminals send them) are one
// message, newlines kept; typed lines stay one message each.
func TestChatPasteOfManyLinesIsOneMessage(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	term := startTerminal(t, chatCmd(t, ctx, t.TempDir(), model.URL))
	term.waitFor("/help for commands")
	require.Contains(t, term.out.String(), "\x1b[?2004h", "chat asks the terminal for bracketed paste")

	// The terminal sends a paste in pieces; the markers may be cut too.
	term.typeKeys("\x1b[20")
	term.typeKeys("0~first line\rsecond\r\n\tindented third\x1b[201")
	term.typeKeys("~")
	term.waitFor("first line␤second␤␉indented third")
	term.typeKeys(" and a tail\r")
	term.waitFor("held 0 answers before this one.")
	require.Equal(t, 1, model.Calls(), "one paste, one turn")
	require.Equal(t, []string{"first line\nsecond\n\tindented third and a tail"}, userTexts(model.Requests()[0]))

	term.typeKeys("typed\r")
	term.waitFor("held 1 answers before this one.")
	term.typeKeys("\x04")
	require.Equal(t, 0, term.exited())
	require.Contains(t, term.out.String(), "\x1b[?2004l", "bracketed paste is turned off on the way out")
}

// /resume takes a unique start of a session id; one shared by several
// sessions or by none gets a message saying so.
func TestChatResumeTakesAUniquePrefix(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	term := startTerminal(t, chatCmd(t, ctx, t.TempDir(), model.URL))
	first := sessionShown(t, term.waitFor("/help for commands"))
	term.typeKeys("hello\r")
	term.waitFor("held 0 answers before this one.")
	term.typeKeys("/new\r")
	second := sessionShown(t, term.waitFor("new session s-")+term.waitFor("\n"))
	term.typeKeys("hello\r")
	term.waitFor("held 0 answers before this one.")

	term.typeKeys("/resume s-\r")
	term.waitFor("s- is the start of 2 sessions")
	term.typeKeys("/resume s-nothing\r")
	term.waitFor("no session s-nothing")
	prefix := first[:2]
	for i := 2; strings.HasPrefix(second, prefix); i++ {
		prefix = first[:i+1]
	}
	term.typeKeys("/resume " + prefix + "\r")
	term.waitFor("resumed session " + first + " · 1 turns")
	term.typeKeys("hello\r")
	term.waitFor("held 1 answers before this one.")
	term.typeKeys("/exit\r")
	require.Equal(t, 0, term.exited())
}

// An approval prompt says until when the server waits; when that passes the
// server denies the command, and the prompt stops asking and says so: the
// next line typed is a message again, not a late answer.
func TestChatApprovalPromptClosesAtTheServersDeadline(t *testing.T) {
	model, err := scripted.Start(chatScript)
	require.NoError(t, err)
	defer model.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "herald.yaml"), "approvals:\n  timeout: 3s\n")
	writeFile(t, filepath.Join(dir, "build", "out.o"), "x")
	term := startTerminal(t, chatCmd(t, ctx, dir, model.URL))
	term.waitFor("/help for commands")
	term.typeKeys("clean the build\r")
	asked := term.waitFor("left)")
	require.Regexp(t, `Allow it\? \[y/N\] \(answer by \d\d:\d\d:\d\d, [0-9]s left\)`, asked)
	closed := term.waitFor("approval closed: the deadline passed")
	term.waitFor("Done with the tool.")
	term.waitFor("› ")
	require.NotContains(t, closed, "(no answer: denied)", "the closed prompt sends no answer of its own")
	require.DirExists(t, filepath.Join(dir, "build"), "nobody approved: the command did not run")

	term.typeKeys("y\r")
	term.waitFor("answers before this one.")
	last := model.Requests()[model.Calls()-1]
	require.Equal(t, "y", last.LastMessage().Text(), "the line typed after the prompt closed is a chat message")
	require.DirExists(t, filepath.Join(dir, "build"))
	term.typeKeys("/exit\r")
	require.Equal(t, 0, term.exited())
}
