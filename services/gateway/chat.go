package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// chatClient speaks the OpenAI chat-completions API (OpenAI, OpenRouter,
// DeepSeek, Gemini's OpenAI endpoint, Ollama, vLLM, …) through openai-go.
type chatClient struct {
	ep     endpoint
	client openai.Client
}

func newChatClient(ep endpoint, hc *http.Client) *chatClient {
	return &chatClient{ep: ep, client: openai.NewClient(sdkOptions(ep, hc)...)}
}

// sdkOptions configure openai-go for one endpoint: the gateway does its own
// retries, and every non-2xx answer is captured for classification.
func sdkOptions(ep endpoint, hc *http.Client) []option.RequestOption {
	return []option.RequestOption{
		option.WithBaseURL(ep.baseURL + "/"),
		option.WithAPIKey(ep.keyOrPlaceholder()),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return captureStatus(next(req))
		}),
	}
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
	return modelAnswer{message: msg, finishReason: ch.FinishReason,
		usage: chatUsage(res.Usage), promptTokens: res.Usage.PromptTokens}, nil
}

func (c *chatClient) stream(ctx context.Context, params openai.ChatCompletionNewParams, onDelta func(string)) (modelAnswer, error) {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.client.Chat.Completions.NewStreaming(ctx, params)
	defer func() { _ = s.Close() }()
	var acc openai.ChatCompletionAccumulator
	var reasoning strings.Builder
	for s.Next() {
		chunk := s.Current()
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
	return modelAnswer{message: msg, finishReason: ch.FinishReason,
		usage: chatUsage(acc.Usage), promptTokens: acc.Usage.PromptTokens}, nil
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
		Tools:    chatToolsToWire(call.tools),
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
func (c *chatClient) sendsReasoning() bool {
	return c.ep.provider != "openai" && !strings.Contains(c.ep.baseURL, "api.openai.com")
}

func chatMessagesToWire(msgs []*heraldpb.ChatMessage, withReasoning bool, marks map[int]bool) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for i, m := range msgs {
		if marks[i] && m.GetContent() != "" {
			out = append(out, markedToWire(m, withReasoning))
			continue
		}
		switch m.GetRole() {
		case "system":
			out = append(out, openai.SystemMessage(m.GetContent()))
		case "assistant":
			out = append(out, assistantToWire(m, withReasoning))
		case "tool":
			out = append(out, openai.ToolMessage(m.GetContent(), m.GetToolCallId()))
		default:
			out = append(out, openai.UserMessage(m.GetContent()))
		}
	}
	return out
}

// cacheMarks picks the messages that carry Anthropic prompt-caching markers
// when a Claude model is reached through an OpenAI-compatible router
// (OpenRouter passes cache_control through): the last system message and
// the last three others. Other models get none.
func cacheMarks(call modelCall) map[int]bool {
	if !strings.Contains(strings.ToLower(call.model), "claude") {
		return nil
	}
	marks := map[int]bool{}
	system, tail := false, 0
	for i := len(call.messages) - 1; i >= 0; i-- {
		switch {
		case call.messages[i].GetRole() == "system":
			marks[i] = marks[i] || !system
			system = true
		case tail < cachedTail:
			marks[i] = true
			tail++
		}
	}
	return marks
}

// markedToWire sends m's text as one content part carrying cache_control.
func markedToWire(m *heraldpb.ChatMessage, withReasoning bool) openai.ChatCompletionMessageParamUnion {
	part := openai.ChatCompletionContentPartTextParam{Text: m.GetContent()}
	part.SetExtraFields(map[string]any{"cache_control": map[string]string{"type": "ephemeral"}})
	switch m.GetRole() {
	case "system":
		return openai.SystemMessage([]openai.ChatCompletionContentPartTextParam{part})
	case "tool":
		return openai.ToolMessage([]openai.ChatCompletionContentPartTextParam{part}, m.GetToolCallId())
	case "assistant":
		msg := assistantToWire(m, withReasoning)
		msg.OfAssistant.Content = openai.ChatCompletionAssistantMessageParamContentUnion{
			OfArrayOfContentParts: []openai.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{{OfText: &part}}}
		return msg
	default:
		return openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{{OfText: &part}})
	}
}

func chatToolsToWire(specs []*heraldpb.ToolSpec) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(specs))
	for _, t := range specs {
		fn := shared.FunctionDefinitionParam{Name: t.GetName(), Parameters: toolParameters(t.GetParametersJson())}
		if t.GetDescription() != "" {
			fn.Description = openai.String(t.GetDescription())
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out
}

// toolParameters parses a tool's JSON schema; a broken schema degrades to an
// empty object schema rather than failing the whole call.
func toolParameters(schema string) map[string]any {
	params := map[string]any{}
	if schema != "" && json.Unmarshal([]byte(schema), &params) == nil && len(params) > 0 {
		return params
	}
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

func chatMessageFromWire(m openai.ChatCompletionMessage) *heraldpb.ChatMessage {
	out := &heraldpb.ChatMessage{Role: "assistant", Content: m.Content}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &heraldpb.ToolCall{Id: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out
}

// reasoningField reads the reasoning text OpenAI-compatible servers send
// outside the official schema (reasoning_content: DeepSeek, vLLM; reasoning: OpenRouter).
func reasoningField(extra map[string]respjson.Field) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		f, ok := extra[key]
		if !ok || f.Raw() == "" || f.Raw() == "null" {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil {
			return s
		}
	}
	return ""
}

// chatUsage normalises OpenAI usage: cached and cache-written tokens are part
// of prompt_tokens, reasoning tokens part of completion_tokens, so each is
// counted in exactly one class.
func chatUsage(u openai.CompletionUsage) *heraldpb.Usage {
	cached := u.PromptTokensDetails.CachedTokens
	written := u.PromptTokensDetails.CacheWriteTokens
	input := u.PromptTokens - cached - written
	if input < 0 {
		input = 0
	}
	return &heraldpb.Usage{
		InputTokens:      input,
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  cached,
		CacheWriteTokens: written,
		ReasoningTokens:  u.CompletionTokensDetails.ReasoningTokens,
	}
}

func assistantToWire(m *heraldpb.ChatMessage, withReasoning bool) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	if m.GetContent() != "" || len(m.GetToolCalls()) == 0 {
		a.Content.OfString = openai.String(m.GetContent())
	}
	for _, tc := range m.GetToolCalls() {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       tc.GetId(),
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.GetName(), Arguments: tc.GetArguments()},
			},
		})
	}
	if withReasoning && m.GetReasoning() != "" {
		a.SetExtraFields(map[string]any{"reasoning_content": m.GetReasoning()})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}
