package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// stream submits one task and follows it to its result, showing progress
// and answering approval and clarify prompts.
type stream struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	cio   cliIO
	quiet bool
	yes   bool
	task  proto.Task

	// ask, when set, reads the answer to an approval or clarify prompt
	// (herald chat's line editor); else lines are read from cio.in.
	ask func(prompt string) (string, bool)
	// abortAsk ends a prompt of ask the server no longer waits for.
	abortAsk func()
	// stopNow, closed by a second Ctrl-C, ends the wait for an interrupted
	// turn's result at once.
	stopNow <-chan struct{}

	answer     strings.Builder // text streamed in the current step
	answerStep int             // the step answer's deltas belong to
	interrupt  bool

	open   *question     // the approval or clarify prompt on screen
	queued []proto.Event // questions asked while another is open
	typed  chan typedAnswer
	lines  chan typedLine // standard input, once a question read it
}

// errStoppedNow says a second Ctrl-C ended the wait for the interrupted
// turn's result.
var errStoppedNow = errors.New("stopped at once (Ctrl-C twice), without waiting for the interrupted turn's result")

// interruptGrace is how long to wait for the interrupted turn's result.
const interruptGrace = 15 * time.Second

func (s *stream) run(ctx context.Context) (proto.Result, error) {
	sid := s.task.SessionID
	events := make(chan *nats.Msg, 4096)
	evSub, err := s.nc.ChanSubscribe(bus.SessionEvents(sid), events)
	if err != nil {
		return proto.Result{}, err
	}
	defer evSub.Unsubscribe()
	results := make(chan *nats.Msg, 16)
	resSub, err := s.nc.ChanSubscribe(bus.SessionResult(sid), results)
	if err != nil {
		return proto.Result{}, err
	}
	defer resSub.Unsubscribe()
	if err := bus.PublishJSON(ctx, s.js, bus.TasksSubject, "task:"+s.task.TaskID, s.task); err != nil {
		return proto.Result{}, fmt.Errorf("submit task: %w", err)
	}
	poll := time.NewTicker(2 * time.Second)
	defer poll.Stop()
	s.typed = make(chan typedAnswer, 1)
	defer s.turnEnded()
	done := ctx.Done()
	var deadline <-chan time.Time
	for {
		select {
		case <-done:
			done = nil
			s.sendInterrupt()
			deadline = time.After(interruptGrace)
		case <-deadline:
			return proto.Result{}, fmt.Errorf("interrupted, and no result arrived within %s", interruptGrace)
		case <-s.stopNow:
			return proto.Result{}, fmt.Errorf("%w: session %s was told to stop its turn", errStoppedNow, sid)
		case m := <-events:
			s.onEvent(s.payload(m))
		case a := <-s.typed:
			s.answered(a)
		case m := <-results:
			if res, ok := s.match(s.payload(m)); ok {
				s.drain(events)
				return s.finish(res), nil
			}
		case <-poll.C:
			if res, ok := s.pollResult(); ok {
				s.drain(events)
				return s.finish(res), nil
			}
		}
	}
}

// drain shows the events that arrived with or just before the result: the
// result and the last deltas travel on different subjects, so they may be
// delivered in either order.
func (s *stream) drain(events <-chan *nats.Msg) {
	quiet := time.NewTimer(50 * time.Millisecond)
	defer quiet.Stop()
	for {
		select {
		case m := <-events:
			s.onEvent(s.payload(m))
		case <-quiet.C:
			return
		}
	}
}

// payload is a message's whole payload: an event or result over the
// server's max payload arrives as a claim, resolved from its claim store.
func (s *stream) payload(m *nats.Msg) []byte {
	if m.Header.Get(bus.HeaderClaim) == "" {
		return m.Data
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := bus.Resolve(ctx, s.js, m.Subject, m.Header, m.Data)
	if err != nil {
		return m.Data
	}
	return data
}

func (s *stream) match(data []byte) (proto.Result, bool) {
	var res proto.Result
	if json.Unmarshal(data, &res) != nil || res.TaskID != s.task.TaskID {
		return proto.Result{}, false
	}
	return res, true
}

// pollResult covers a result published while the subscription lagged.
func (s *stream) pollResult() (proto.Result, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Read by subscription: a client's NATS user may read results only.
	raw, err := bus.LastBySubscription(ctx, s.js, bus.StreamSessions, bus.SessionResult(s.task.SessionID))
	if err != nil {
		return proto.Result{}, false
	}
	return s.match(raw.Data)
}

func (s *stream) finish(res proto.Result) proto.Result {
	if !s.quiet {
		if strings.TrimSpace(s.answer.String()) != strings.TrimSpace(res.FinalResponse) && res.FinalResponse != "" {
			fmt.Fprintln(s.cio.out, res.FinalResponse)
		} else if s.answer.Len() > 0 {
			fmt.Fprintln(s.cio.out)
		}
	}
	return res
}

func (s *stream) sendInterrupt() {
	if s.interrupt {
		return
	}
	s.interrupt = true
	if !s.quiet {
		fmt.Fprintln(s.cio.err, "\n^C interrupting…")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = bus.PublishJSON(ctx, s.js, bus.SessionInterrupt(s.task.SessionID), "", proto.Interrupt{Reason: "user pressed Ctrl-C"})
}

func (s *stream) onEvent(data []byte) {
	var ev proto.Event
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch ev.Type {
	case proto.EventApproval, proto.EventClarify:
		s.questionAsked(ev)
		return
	case proto.EventToolFinished:
		s.toolDecided(ev)
	}
	if s.quiet {
		return
	}
	switch ev.Type {
	case proto.EventState:
		// The loop's state and the gateway's deltas travel on different
		// connections: a step's "thinking" may arrive after its first
		// deltas, and must not end the text it began.
		if ev.State == proto.StateThinking && s.answer.Len() > 0 && ev.Step > s.answerStep {
			fmt.Fprintln(s.cio.out)
			s.answer.Reset()
		}
	case proto.EventDelta:
		s.answer.WriteString(ev.Delta)
		s.answerStep = ev.Step
		fmt.Fprint(s.cio.out, ev.Delta)
	case proto.EventToolStarted:
		if s.answer.Len() > 0 {
			fmt.Fprintln(s.cio.out)
			s.answer.Reset()
		}
		fmt.Fprintf(s.cio.err, "  ⚙ %s %s\n", ev.Tool, shorten(readableArgs(ev.Args), 120))
	case proto.EventToolFinished:
		fmt.Fprintf(s.cio.err, "  %s %s %s\n", toolMark(ev.Status), ev.Tool, ev.Status)
	case proto.EventRetry, proto.EventFallback, proto.EventCompression, proto.EventContextPressure, proto.EventWarning:
		fmt.Fprintf(s.cio.err, "  · %s: %s\n", ev.Type, ev.Message)
	case proto.EventQueued:
		if ev.Position > 0 {
			fmt.Fprintf(s.cio.err, "  · queued (position %d): %s\n", ev.Position, ev.Message)
		} else {
			fmt.Fprintf(s.cio.err, "  · queued: %s\n", ev.Message)
		}
	}
}

// turnEnded closes a question still open when the turn is over.
func (s *stream) turnEnded() {
	s.queued = nil
	s.closeQuestion("⌛ question closed: the turn ended")
}

func (s *stream) sendInput(in proto.Input) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = bus.PublishJSON(ctx, s.js, bus.SessionInput(s.task.SessionID), "", in)
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// toolMark is ✓ for a tool call that ran and succeeded, ✗ for any other
// ending (denied, refused, failed, timed out, outcome unknown).
func toolMark(status string) string {
	if status == "ok" {
		return "✓"
	}
	return "✗"
}

// readableArgs shows a tool call's JSON arguments as a person reads them:
// re-encoded without Go's HTML escaping, so a command shows && rather than
// \u0026\u0026; arguments cut short (no longer JSON) are unescaped alike.
func readableArgs(args string) string {
	var v any
	if err := json.Unmarshal([]byte(args), &v); err == nil {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			return strings.TrimSuffix(b.String(), "\n")
		}
	}
	return strings.NewReplacer(`\u0026`, "&", `\u003c`, "<", `\u003e`, ">").Replace(args)
}
