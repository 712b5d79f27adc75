package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// modelCall is one attempt's question to one provider.
type modelCall struct {
	model    string
	messages []*heraldpb.ChatMessage
	tools    []*heraldpb.ToolSpec
	// toolsKey names tools (their set's digest) for encoders that keep a
	// set's encoding; "" when the request carried its tools.
	toolsKey string
	maxOut   int64
	stream   bool
	// reasoning is what the call asks of a reasoning model; each client
	// maps it to its provider's fields, or leaves it out.
	reasoning reasoningAsk
	// thinkBack: Anthropic thinking blocks of the history go back (the
	// model takes thinking); set by the Anthropic encoder.
	thinkBack bool
	// onDelta receives content as it streams (already in arrival order).
	onDelta func(text string)
	// wire holds the encodings of messages[:len(wire)], kept with the
	// gateway's history; nil when the request carried its messages.
	wire []*wireSlot
}

// modelAnswer is a provider's answer in the internal format, usage normalised.
type modelAnswer struct {
	message      *heraldpb.ChatMessage
	finishReason string
	usage        *heraldpb.Usage
	promptTokens int64
	// fees counts what the provider charged by unit beyond tokens (web
	// searches), by fee name.
	fees map[string]int64
}

// modelClient speaks one API mode to one endpoint.
type modelClient interface {
	complete(ctx context.Context, call modelCall) (modelAnswer, error)
}

func newModelClient(ep endpoint, hc *http.Client) modelClient {
	switch ep.mode {
	case ModeAnthropicMessages:
		return newAnthropicClient(ep, hc)
	case ModeCodexResponses:
		return newResponsesClient(ep, hc)
	default:
		return newChatClient(ep, hc)
	}
}

// placeholderKey is sent to endpoints that need none, so SDKs do not refuse
// to build a request; it is not a secret.
const placeholderKey = "not-needed"

func (e endpoint) keyOrPlaceholder() string {
	if e.apiKey == "" {
		return placeholderKey
	}
	return e.apiKey
}

// newHTTPClient is shared by every endpoint: no overall timeout (calls are
// bounded by their context), generous idle connections for concurrency, and
// a stream that stays silent for streamIdle is cut as a timeout.
func newHTTPClient(streamIdle time.Duration, concurrency int) *http.Client {
	tr := &http.Transport{
		Proxy:       http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// As many idle connections as calls in flight: an HTTP/1.1
		// provider needs a connection per call, and with fewer kept each
		// burst beyond them dialled (and TLS-handshook) anew every call.
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: stallGuard{next: tr, idle: streamIdle}}
}

// stallGuard watches event streams: a provider that stops sending mid-answer
// would otherwise hold the call until its overall timeout.
type stallGuard struct {
	next http.RoundTripper
	idle time.Duration
}

func (g stallGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := g.next.RoundTrip(req)
	if err != nil || g.idle <= 0 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res, err
	}
	res.Body = newIdleBody(res.Body, g.idle)
	return res, nil
}

// idleBody closes its body when no byte arrived for idle, and reports the
// read that fails as a stall (a timeout), not as the close it caused.
type idleBody struct {
	body    io.ReadCloser
	idle    time.Duration
	timer   *time.Timer
	stalled atomic.Bool
}

func newIdleBody(body io.ReadCloser, idle time.Duration) *idleBody {
	b := &idleBody{body: body, idle: idle}
	b.timer = time.AfterFunc(idle, func() {
		b.stalled.Store(true)
		_ = body.Close()
	})
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if b.stalled.Load() {
		return n, errStalled{idle: b.idle}
	}
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}

// errStalled is a net.Error timeout, so it is classified like one.
type errStalled struct{ idle time.Duration }

func (e errStalled) Error() string {
	return fmt.Sprintf("the stream sent nothing for %s", e.idle)
}
func (errStalled) Timeout() bool   { return true }
func (errStalled) Temporary() bool { return true }

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// captureStatus turns a non-2xx response into a *statusError before any SDK
// sees it, keeping the status, headers and (bounded) body for classification.
func captureStatus(res *http.Response, err error) (*http.Response, error) {
	if err != nil || res.StatusCode < 300 {
		return res, err
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	return nil, &statusError{status: res.StatusCode, body: string(body), header: res.Header}
}
