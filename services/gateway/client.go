package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// modelCall is one attempt's question to one provider.
type modelCall struct {
	model    string
	messages []*heraldpb.ChatMessage
	tools    []*heraldpb.ToolSpec
	maxOut   int64
	stream   bool
	// onDelta receives content as it streams (already in arrival order).
	onDelta func(text string)
}

// modelAnswer is a provider's answer in the internal format, usage normalised.
type modelAnswer struct {
	message      *heraldpb.ChatMessage
	finishReason string
	usage        *heraldpb.Usage
	promptTokens int64
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
// bounded by their context), generous idle connections for concurrency.
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr}
}

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
