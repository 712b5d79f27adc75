package toolrunner

import (
	"context"
	"time"

	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// earlyRun is a call of a tool that only reads the workspace, started on
// the call's first delivery beside the reads that decide whether it may run
// at all (its stored result, its breaker streak, the pre_tool_call ask).
// Reading has no effect to hold back, and those reads are a round trip each
// call would otherwise wait out before the tool starts. Its outcome counts
// only once they let the call run; otherwise it is dropped unseen: a stored
// result is answered as stored, a refusal or an open breaker as such.
type earlyRun struct {
	c   *call
	ran func() earlyOutcome
}

// earlyOutcome is what an early read produced and how long it took; a
// panic in it is handed over to be raised where the call is handled, as
// if the tool had run there.
type earlyOutcome struct {
	o     outcome
	took  time.Duration
	panic any
}

// outcome is the read's outcome and duration, raising its panic, if any.
func (e *earlyRun) outcome() (outcome, time.Duration) {
	r := e.ran()
	if r.panic != nil {
		panic(r.panic)
	}
	return r.o, r.took
}

// runEarly starts req at once when its tool is one of this runner's own
// read-only tools (read_file, search_files) and a slot of its concurrency
// limit is free; nil when the call is to wait for its checks instead. A
// redelivered call is left to wait: it more likely has a stored result.
func (s *Service) runEarly(ctx context.Context, req *heraldpb.ToolCallRequest, delivered uint64) *earlyRun {
	t, own := s.tools[req.GetTool()]
	if !own || t == nil || delivered > 1 {
		return nil
	}
	spec, found := toolspec.Lookup(req.GetTool())
	if !found || !spec.ReadOnly {
		return nil
	}
	release, free := s.limits.tryAcquire(spec.Name)
	if !free {
		return nil
	}
	c, _ := s.newCall(req, spec, t, delivered)
	if c == nil {
		release() // the call fails the same way when it is prepared as usual
		return nil
	}
	return &earlyRun{c: c, ran: inBackground(func() (r earlyOutcome) {
		defer release()
		defer c.ws.close()
		defer func() { r.panic = recover() }()
		start := time.Now()
		r.o = t(ctx, c)
		r.took = time.Since(start)
		return r
	})}
}
