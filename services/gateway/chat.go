package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// chatClient speaks the OpenAI chat-completions API (OpenAI, OpenRouter,
// DeepSeek, Gemini's OpenAI endpoint, Ollama, vLLM, …) through openai-go.
type chatClient struct {
	ep     endpoint
	client openai.Client
	tools  toolMemo
}

func newChatClient(ep endpoint, hc *http.Client) *chatClient {
	return &chatClient{ep: ep, client: openai.NewClient(sdkOptions(ep, hc)...)}
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
			return captureStatus(next(req))
		}),
	}
	if !ep.isOpenAI() {
		opts = append(opts, option.WithHeaderDel("OpenAI-Organization"), option.WithHeaderDel("OpenAI-Project"))
	}
	return opts
}

func (c *chatClient) complete(ctx context.Context, call modelCall) (modelAnswer, error) {
	params := c.params(call)
	if call.stream {
		return c.stream(ctx, params, call.onDelta)
	}
	res, err := c.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return modelAnswer{}, err
	}
	if len(res.Choices) == 0 {
		return modelAnswer{}, garbage("the response holds no choices")
	}
	ch := res.Choices[0]
	msg := chatMessageFromWire(ch.Message)
	msg.Reasoning = reasoningField(ch.Message.JSON.ExtraFields)
	return asRefusal(modelAnswer{message: msg, finishReason: ch.FinishReason,
		usage: chatUsage(res.Usage), promptTokens: res.Usage.PromptTokens}, ch.Message.Refusal), nil
}

func (c *chatClient) stream(ctx context.Context, params openai.ChatCompletionNewParams, onDelta func(string)) (modelAnswer, error) {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.client.Chat.Completions.NewStreaming(ctx, params)
	defer func() { _ = s.Close() }()
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	var calls toolCallIndexer
	for s.Next() {
		chunk := s.Current()
		calls.fix(&chunk)
		if !acc.AddChunk(chunk) {
			return modelAnswer{}, garbage("the stream sent a chunk that contradicts earlier ones")
		}
		for _, ch := range chunk.Choices {
			reasoning.WriteString(reasoningField(ch.Delta.JSON.ExtraFields))
			if ch.Delta.Content != "" && onDelta != nil {
				onDelta(ch.Delta.Content)
			}
		}
	}
	if err := s.Err(); err != nil {
		return modelAnswer{}, streamFailure(err)
	}
	if len(acc.Choices) == 0 || acc.Choices[0].FinishReason == "" {
		return modelAnswer{}, garbage("the stream ended before the model finished its answer")
	}
	ch := acc.Choices[0]
	msg := chatMessageFromWire(ch.Message)
	msg.Reasoning = reasoning.String()
	return asRefusal(modelAnswer{message: msg, finishReason: ch.FinishReason,
		usage: chatUsage(acc.Usage), promptTokens: acc.Usage.PromptTokens}, ch.Message.Refusal), nil
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

func (c *chatClient) params(call modelCall) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:    call.model,
		Messages: chatMessagesToWire(call.messages, c.sendsReasoning(), cacheMarks(call)),
		Tools:    c.tools.wire(call.tools),
	}
	if call.maxOut > 0 {
		if c.ep.provider == "openai" {
			p.MaxCompletionTokens = openai.Int(call.maxOut)
		} else {
			p.MaxTokens = openai.Int(call.maxOut)
		}
	}
	return p
}

// sendsReasoning: OpenAI's own API rejects reasoning_content on input
// messages; OpenAI-compatible servers with thinking models want it back.
func (c *chatClient) sendsReasoning() bool { return !c.ep.isOpenAI() }
