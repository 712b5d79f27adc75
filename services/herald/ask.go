package main

import (
	"bufio"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/proto"
)

// question is an approval or clarify prompt on screen. The server waits for
// its answer until a deadline; when the server decides first (the deadline
// passed, someone else answered, the turn ended) the prompt closes and says
// so instead of asking on.
type question struct {
	ev     proto.Event
	cancel chan struct{} // closed when the server no longer waits
	closed bool
}

// typedAnswer is what the person typed at a question (ok false: nothing).
type typedAnswer struct {
	q    *question
	line string
	ok   bool
}

// typedLine is one line read from piped or typed standard input.
type typedLine struct {
	text string
	ok   bool
}

// questionAsked shows ev's prompt, or queues it behind the open one.
func (s *stream) questionAsked(ev proto.Event) {
	if ev.Type == proto.EventApproval && s.yes {
		approved := true
		s.sendInput(proto.Input{RequestID: ev.RequestID, CallID: ev.CallID, Approved: &approved})
		return
	}
	if s.open != nil {
		s.queued = append(s.queued, ev)
		return
	}
	q := &question{ev: ev, cancel: make(chan struct{})}
	s.open = q
	prompt := s.showQuestion(ev)
	go func() {
		line, ok := s.readAnswer(q, prompt)
		s.typed <- typedAnswer{q, line, ok}
	}()
}

// showQuestion prints the question and returns the prompt of its answer.
func (s *stream) showQuestion(ev proto.Event) string {
	by := deadlineNote(ev.Deadline)
	if ev.Type == proto.EventApproval {
		fmt.Fprintf(s.cio.err, "\n⚠ The agent wants to run a command that needs approval:\n    %s\n  %s\n", ev.Args, ev.Message)
		return "  Allow it? [y/N]" + by + " "
	}
	fmt.Fprintf(s.cio.err, "\n? %s\n", ev.Message)
	for i, c := range ev.Choices {
		fmt.Fprintf(s.cio.err, "  %d) %s\n", i+1, c)
	}
	return strings.TrimPrefix(by, " ") + "> "
}

// deadlineNote says until when the server waits, in the person's time.
func deadlineNote(deadline string) string {
	t, err := time.Parse(time.RFC3339, deadline)
	if err != nil {
		return ""
	}
	left := time.Until(t).Round(time.Second)
	if left < 0 {
		left = 0
	}
	return fmt.Sprintf(" (answer by %s, %s left)", t.Local().Format("15:04:05"), left)
}

// readAnswer waits for the person's line, or for the question to close.
func (s *stream) readAnswer(q *question, prompt string) (string, bool) {
	if s.ask != nil {
		return s.ask(prompt)
	}
	fmt.Fprint(s.cio.err, prompt)
	if s.lines == nil {
		s.lines = make(chan typedLine, 1)
		go s.readLines()
	}
	select {
	case l := <-s.lines:
		return l.text, l.ok
	case <-q.cancel:
		return "", false
	}
}

// readLines hands each line of standard input to the question waiting.
func (s *stream) readLines() {
	in := bufio.NewReader(s.cio.in)
	for {
		line, err := in.ReadString('\n')
		if err != nil && line == "" {
			close(s.lines)
			return
		}
		s.lines <- typedLine{strings.TrimSpace(line), true}
	}
}

// answered sends what the person typed, unless the question closed first.
func (s *stream) answered(a typedAnswer) {
	if s.open == a.q {
		s.open = nil
	}
	if !a.q.closed {
		s.sendAnswer(a.q.ev, a.line, a.ok)
	}
	if s.open == nil && len(s.queued) > 0 {
		next := s.queued[0]
		s.queued = s.queued[1:]
		s.questionAsked(next)
	}
}

func (s *stream) sendAnswer(ev proto.Event, line string, ok bool) {
	if ev.Type == proto.EventApproval {
		approved := ok && (strings.EqualFold(line, "y") || strings.EqualFold(line, "yes"))
		if !ok {
			fmt.Fprintln(s.cio.err, "(no answer: denied)")
		}
		s.sendInput(proto.Input{RequestID: ev.RequestID, CallID: ev.CallID, Approved: &approved})
		return
	}
	for i, c := range ev.Choices {
		if line == fmt.Sprint(i+1) {
			line = c
		}
	}
	s.sendInput(proto.Input{RequestID: ev.RequestID, CallID: ev.CallID, Answer: line})
}

// toolDecided closes the open question of a call the server has finished:
// it stopped waiting (deadline, another client's answer) and decided.
func (s *stream) toolDecided(ev proto.Event) {
	for i, q := range s.queued {
		if q.CallID == ev.CallID {
			s.queued = append(s.queued[:i], s.queued[i+1:]...)
			break
		}
	}
	if s.open == nil || s.open.closed || s.open.ev.CallID != ev.CallID {
		return
	}
	why := "the server decided"
	if t, err := time.Parse(time.RFC3339, s.open.ev.Deadline); err == nil && !time.Now().Before(t) {
		why = "the deadline passed"
	}
	what := "approval"
	if s.open.ev.Type == proto.EventClarify {
		what = "question"
	}
	s.closeQuestion(fmt.Sprintf("⌛ %s closed: %s (%s %s)", what, why, ev.Tool, ev.Status))
}

// closeQuestion stops asking the open question, saying why, and waits for
// its prompt to end.
func (s *stream) closeQuestion(why string) {
	q := s.open
	if q == nil || q.closed {
		return
	}
	q.closed = true
	close(q.cancel)
	fmt.Fprintf(s.cio.err, "\n  %s\n", why)
	if s.ask != nil && s.abortAsk == nil {
		// a line editor that cannot be stopped (piped input): its read
		// ends with the next line, taken for nothing, before another begins
		s.answered(<-s.typed)
		return
	}
	if s.abortAsk != nil {
		s.abortAsk()
	}
	select {
	case a := <-s.typed:
		s.answered(a)
	case <-time.After(5 * time.Second):
	}
}
