package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// chatClient speaks the OpenAI chat-completions API (OpenAI, OpenRouter,
// Groq, DeepSeek, Gemini's OpenAI endpoint, Ollama, vLLM, …). openai-go
// carries the request (headers, base URL, status capture); the body is
// built by the mode's encoder and the answer is read by the gateway's own
// decoder, which knows each provider's profile.
type chatClient struct {
	ep      endpoint
	client  openai.Client
	encoder requestEncoder
}

// requestEncoder builds one API mode's request body for a call. It is the
// one place a faster encoding can replace (issue 14) without touching how
// answers are read.
type requestEncoder interface {
	encode(call modelCall) (*requestBody, error)
}

func newChatClient(ep endpoint, hc *http.Client) *chatClient {
	return &chatClient{ep: ep, client: openai.NewClient(sdkOptions(ep, hc)...), encoder: &chatEncoder{profile: ep.profile}}
}

// sdkOptions configure openai-go for one endpoint: the gateway does its own
// retries, and every non-2xx answer is captured for classification.
// openai-go adds OPENAI_ORG_ID / OPENAI_PROJECT_ID from the environment to
// every request; they identify an OpenAI account and are not sent elsewhere.
func sdkOptions(ep endpoint, hc *http.Client) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithBaseURL(ep.baseURL + "/"),
		option.WithAPIKey(ep.keyOrPlaceholder()),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			attachBody(req)
			return captureStatus(next(req))
		}),
	}
	if !ep.isOpenAI() {
		opts = append(opts, option.WithHeaderDel("OpenAI-Organization"), option.WithHeaderDel("OpenAI-Project"))
	}
	if ep.profile.Name == "azure" {
		// Azure OpenAI's v1 API takes the resource key in api-key.
		opts = append(opts, option.WithHeader("api-key", ep.keyOrPlaceholder()))
	}
	return opts
}

func (c *chatClient) complete(ctx context.Context, call modelCall) (modelAnswer, error) {
	body, err := c.encoder.encode(call)
	if err != nil {
		return modelAnswer{}, fmt.Errorf("encode chat request: %w", err)
	}
	var res *http.Response
	if err := c.client.Post(withBody(ctx, body), "chat/completions", body, &res); err != nil {
		return modelAnswer{}, err
	}
	defer func() { _ = res.Body.Close() }()
	dec := newChatDecoder(c.ep.profile, call)
	if !call.stream {
		var whole chatResponse
		if err := json.NewDecoder(res.Body).Decode(&whole); err != nil {
			return modelAnswer{}, fmt.Errorf("error parsing response json: %w", err)
		}
		return dec.whole(whole)
	}
	events := ssestream.NewDecoder(res)
	for events.Next() {
		if err := dec.chunk(events.Event().Data); err != nil {
			return dec.failed(err)
		}
	}
	if err := events.Err(); err != nil {
		return dec.failed(err)
	}
	return dec.finish()
}

// partialError is an attempt that failed after the provider had reported
// usage (a stream broken off, or an error event after the usage chunk):
// those tokens were spent and are billed.
type partialError struct {
	err   error
	usage *heraldpb.Usage
}

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

// spentUsage is the usage an attempt's error carries, nil when none.
func spentUsage(err error) *heraldpb.Usage {
	var pe *partialError
	if errors.As(err, &pe) {
		return pe.usage
	}
	return nil
}

// streamFailure classifies what broke a stream: an error event the provider
// sent in-band is read like an error body.
func streamFailure(err error) error {
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return &statusError{body: string(se.Event.Data)}
	}
	return err
}
