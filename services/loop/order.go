package loop

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// errEarly means a message answers an effect whose transition is not
// committed yet: effects are published before the state commit, so a fast
// answer can overtake it. advance waits briefly and re-reads; the message is
// redelivered if the commit still has not landed.
var errEarly = errors.New("message is ahead of the session state")

// commitSignals wakes inputs that came early (errEarly) when this process
// commits the session's next transition, instead of after a fixed wait:
// a tool that answers within microseconds overtakes the commit of the
// transition that called it on most steps.
type commitSignals struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// next returns a channel closed at the session's next commit here.
func (c *commitSignals) next(sid string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]chan struct{}{}
	}
	ch, ok := c.m[sid]
	if !ok {
		ch = make(chan struct{})
		c.m[sid] = ch
	}
	return ch
}

// done wakes whoever waits for the session's next commit.
func (c *commitSignals) done(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.m[sid]; ok {
		close(ch)
		delete(c.m, sid)
	}
}

// classifyResponse tells an early model response (errEarly) from a stale one (nil).
func classifyResponse(st *State, requestID string) error {
	if responseAhead(st, requestID) {
		return errEarly
	}
	return nil
}

// classifyResult tells an early tool result (errEarly) from a stale one (nil).
func classifyResult(st *State, callID string) error {
	if resultAhead(st, callID) {
		return errEarly
	}
	return nil
}

// position orders the model calls and tool steps of a session.
type position struct{ turn, step, attempt int }

func (p position) after(q position) bool {
	if p.turn != q.turn {
		return p.turn > q.turn
	}
	if p.step != q.step {
		return p.step > q.step
	}
	return p.attempt > q.attempt
}

func (st *State) position() position { return position{st.Turn, st.Step, st.Attempt} }

// requestPosition parses a request id "<sid>:<turn>:<step>:<attempt>".
func requestPosition(id string) (position, bool) {
	parts := strings.Split(id, ":")
	if len(parts) < 4 {
		return position{}, false
	}
	var p position
	_, err := fmt.Sscanf(strings.Join(parts[len(parts)-3:], " "), "%d %d %d", &p.turn, &p.step, &p.attempt)
	return p, err == nil
}

// callPosition parses a call id "t<turn>s<step>c<index>".
func callPosition(id string) (position, bool) {
	var p position
	var i int
	_, err := fmt.Sscanf(id, "t%ds%dc%d", &p.turn, &p.step, &i)
	return p, err == nil
}

// responseAhead reports whether a model response belongs to a request the
// session has not committed yet.
func responseAhead(st *State, requestID string) bool {
	p, ok := requestPosition(requestID)
	if !ok {
		return false
	}
	return st == nil || p.after(st.position())
}

// resultAhead reports whether a tool result belongs to calls the session has
// not committed yet: a later step, or this step's calls still being decided.
func resultAhead(st *State, callID string) bool {
	p, ok := callPosition(callID)
	if !ok {
		return false
	}
	if st == nil {
		return true
	}
	cur := position{st.Turn, st.Step, 0}
	p.attempt = 0
	if p.after(cur) {
		return true
	}
	return p == cur && st.Pending != nil && st.Pending.Kind == waitLLM
}
