package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/telemetry"
	"github.com/heraldrun/herald/proto"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// progress publishes one call's events on its session's events subject:
// deltas (scrubbed of memory context), retries and fallbacks, numbered in
// the order they happen within the call.
type progress struct {
	s     *Service
	req   *heraldpb.LLMRequest
	seq   int64
	scrub Scrubber
	// shown is the text streamed since the call last started over: a retry
	// or a fallback streams the answer anew, for the user too.
	shown strings.Builder
	// firstToken times the streamed attempt under way to its first text.
	firstToken telemetry.FirstTokenTimer
}

func (p *progress) publish(ev proto.Event) {
	ev.SessionID, ev.TaskID = p.req.GetSessionId(), p.req.GetTaskId()
	ev.Step, ev.RequestID, ev.Seq = int(p.req.GetStep()), p.req.GetRequestId(), p.seq
	ev.BoundTenant = p.req.GetBoundTenant()
	p.seq++
	if err := bus.PublishEvent(p.s.nc, ev); err != nil {
		p.s.log.Debug().Err(err).Str("session_id", ev.SessionID).Str("type", ev.Type).Msg("progress event not published")
	}
}

// delta streams model text, holding back what may be a memory-context tag.
func (p *progress) delta(text string) {
	p.show(p.scrub.Feed(text))
}

// endStream releases text held back at the end of an attempt's stream, and
// resets the scrubber so the next attempt starts clean.
func (p *progress) endStream() {
	p.show(p.scrub.Flush())
	p.scrub = Scrubber{}
}

func (p *progress) show(text string) {
	if text == "" {
		return
	}
	p.shown.WriteString(text)
	p.firstToken.Shown()
	p.publish(proto.Event{Type: proto.EventDelta, Delta: text})
}

// streamed is the text the user has seen of the attempt that ended last.
func (p *progress) streamed() string { return p.shown.String() }

func (p *progress) retry(ep endpoint, attempt int, ae *attemptError, wait time.Duration) {
	p.shown.Reset()
	p.publish(proto.Event{Type: proto.EventRetry, Attempt: attempt, Provider: ep.provider, Model: ep.model,
		Status: string(ae.class),
		Message: fmt.Sprintf("%s failed (%s); retrying in %s (attempt %d)", ep, ae.class,
			wait.Round(time.Millisecond), attempt+1)})
}

func (p *progress) fallback(from, to endpoint, ae *attemptError) {
	p.shown.Reset()
	p.publish(proto.Event{Type: proto.EventFallback, Provider: to.provider, Model: to.model,
		Status:  string(ae.class),
		Message: fmt.Sprintf("%s failed (%s); switching to fallback %s", from, ae.class, to)})
}

// begin starts timing a streamed attempt's first text.
func (p *progress) begin(provider, model string) {
	p.firstToken = telemetry.StartFirstToken(provider, model)
}
