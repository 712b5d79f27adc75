package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// DefaultTimeout is how long a request/reply hook waits (hooks.timeout_ms).
const DefaultTimeout = 250 * time.Millisecond

// Config is how the services use hooks.
type Config struct {
	// Timeout bounds every request/reply hook; the first answer within it counts.
	Timeout time.Duration
	// PreToolCallRequired refuses every tool call that no policy answers.
	PreToolCallRequired bool
}

// ConfigFrom reads the hooks section of herald.yaml.
func ConfigFrom(c config.Config) Config {
	cfg := Config{Timeout: DefaultTimeout, PreToolCallRequired: c.Hooks.PreToolCall == config.HookRequired}
	if c.Hooks.TimeoutMS > 0 {
		cfg.Timeout = time.Duration(c.Hooks.TimeoutMS) * time.Millisecond
	}
	return cfg
}

// Client publishes hook events and asks request/reply hooks.
type Client struct {
	nc  *nats.Conn
	cfg Config
	log zerolog.Logger

	mu     sync.Mutex
	warned map[string]bool
	// quietUntil: till when a subject that had no listener is not asked.
	quietUntil map[string]time.Time
	now        func() time.Time
}

// QuietFor is how long a request/reply hook that had no listener is not
// asked again: with no plugin, every ask was a round trip to the server on
// a model call's or a tool call's path (~40–60 µs each). A plugin that
// starts listening is asked from at most this long after.
const QuietFor = time.Second

// New returns a client on nc; a zero timeout is DefaultTimeout.
func New(nc *nats.Conn, cfg Config, log zerolog.Logger) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Client{nc: nc, cfg: cfg, log: log, warned: map[string]bool{}, quietUntil: map[string]time.Time{}, now: time.Now}
}

// Notify publishes an event hook; events are best effort and a failure is
// only logged, once per subject.
func (c *Client) Notify(subject string, event any) {
	data, err := json.Marshal(event)
	if err == nil {
		err = c.nc.Publish(subject, data)
	}
	if err != nil {
		c.warnOnce(subject, err, "publishing a hook event failed")
	}
}

// errBadReply: an answer that is not JSON or not the hook's shape.
var errBadReply = errors.New("the hook reply is not a JSON object of the expected shape")

// ask sends req on subject and decodes the first answer into reply. It
// reports false when nobody answered in time or the answer was unusable,
// and at once, without asking, for QuietFor after nobody listened (unless
// always: every call must be asked).
func (c *Client) ask(ctx context.Context, subject string, req any, reply any, valid func() bool, always bool) bool {
	if !always && c.quiet(subject) {
		return false
	}
	data, err := json.Marshal(req)
	if err != nil {
		c.warnOnce(subject, err, "encoding a hook request failed")
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		c.mu.Lock()
		c.quietUntil[subject] = c.now().Add(QuietFor)
		c.mu.Unlock()
		return false
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		c.warnOnce(subject, err, fmt.Sprintf("a hook listener did not answer within %s", c.cfg.Timeout))
		return false
	case err != nil:
		c.warnOnce(subject, err, "asking a hook failed")
		return false
	}
	if err := decodeStrict(msg.Data, reply); err != nil || !valid() {
		c.warnOnce(subject, errBadReply, "ignoring a hook reply")
		return false
	}
	return true
}

// quiet reports whether subject had no listener less than QuietFor ago.
func (c *Client) quiet(subject string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.quietUntil[subject]
	return ok && c.now().Before(until)
}

// decodeStrict decodes a JSON object; fields of the wrong type fail.
func decodeStrict(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return errBadReply
	}
	return json.Unmarshal(data, v)
}

// warnOnce logs a hook's trouble the first time it happens on a subject,
// so a broken plugin cannot flood the logs with one line per call.
func (c *Client) warnOnce(subject string, err error, msg string) {
	c.mu.Lock()
	seen := c.warned[subject]
	c.warned[subject] = true
	c.mu.Unlock()
	if !seen {
		c.log.Warn().Err(err).Str("subject", subject).Msg(msg + " (logged once per subject)")
	}
}

// SessionStarted publishes on_session_start.
func (c *Client) SessionStarted(ev SessionStart) { c.Notify(bus.HookOnSessionStart(), ev) }

// APIRequestStarting publishes pre_api_request.
func (c *Client) APIRequestStarting(ev APIRequest) { c.Notify(bus.HookPreAPIRequest(), ev) }

// APIRequestDone publishes post_api_request.
func (c *Client) APIRequestDone(ev APIResponse) { c.Notify(bus.HookPostAPIRequest(), ev) }

// LLMContextFor asks pre_llm_call for context to add to this call's user
// message; it returns the context fenced, or "" when none came.
func (c *Client) LLMContextFor(ctx context.Context, call LLMCall) string {
	var r LLMContext
	if !c.ask(ctx, bus.HookPreLLMCall(), call, &r, func() bool { return r.Context != nil }, false) {
		return ""
	}
	return Fence(*r.Context)
}

// Decision is the outcome of pre_tool_call.
type Decision struct {
	Allow bool
	// Reason is the tool result of a refused call.
	Reason string
}

// MayCallTool asks pre_tool_call whether a tool call may run. No answer
// allows it, unless hooks.pre_tool_call is required.
func (c *Client) MayCallTool(ctx context.Context, call ToolCall) Decision {
	var v ToolVerdict
	if !c.ask(ctx, bus.HookPreToolCall(), call, &v, func() bool { return v.Allow != nil }, c.cfg.PreToolCallRequired) {
		if c.cfg.PreToolCallRequired {
			return Decision{Reason: fmt.Sprintf("refused: hooks.pre_tool_call is required and no policy service answered within %s, so the %s call was not run", c.cfg.Timeout, call.Tool)}
		}
		return Decision{Allow: true}
	}
	if *v.Allow {
		return Decision{Allow: true}
	}
	reason := v.Reason
	if reason == "" {
		reason = fmt.Sprintf("refused by the pre_tool_call policy: the %s call was not run", call.Tool)
	}
	return Decision{Reason: reason}
}
