package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// responsesClient speaks the OpenAI Responses API (codex_responses) through
// openai-go. History is sent in full each time (store=false): the gateway is
// stateless, so it never relies on previous_response_id.
type responsesClient struct {
	ep      endpoint
	client  openai.Client
	encoder requestEncoder
}

func newResponsesClient(ep endpoint, hc *http.Client) *responsesClient {
	return &responsesClient{ep: ep, client: openai.NewClient(sdkOptions(ep, hc)...), encoder: &responsesEncoder{profile: ep.profile}}
}

// responsesEncoder builds Responses API bodies through openai-go's params.
type responsesEncoder struct{ profile Profile }

func (e *responsesEncoder) encode(call modelCall) (*requestBody, error) {
	if len(call.wire) == 0 || len(call.wire) > len(call.messages) {
		return e.whole(call)
	}
	frame, err := json.Marshal(e.params(call, responses.ResponseInputParam{responsesSentinel}))
	if err != nil {
		return nil, err
	}
	parts := make([][]byte, len(call.messages))
	items := 0
	for i, m := range call.messages {
		if parts[i], err = e.message(call, i, m); err != nil {
			return nil, err
		}
		items += len(parts[i])
	}
	if body, ok := spliceBody(frame, responsesSentinelJSON, parts); ok && items > 0 {
		return body, nil
	}
	return e.whole(call) // no input items, or the sentinel is not there once
}

func (e *responsesEncoder) whole(call modelCall) (*requestBody, error) {
	var items responses.ResponseInputParam
	for _, m := range call.messages {
		items = append(items, responsesItems(m)...)
	}
	b, err := json.Marshal(e.params(call, items))
	if err != nil {
		return nil, err
	}
	return bodyOf(b), nil
}

// message is the encoding of call.messages[i]'s input items joined by
// commas (none for a system message), kept in its wire slot when it has one.
func (e *responsesEncoder) message(call modelCall, i int, m *heraldpb.ChatMessage) ([]byte, error) {
	keep := i < len(call.wire)
	if keep {
		if b, ok := call.wire[i].get(e); ok {
			return b, nil
		}
	}
	var b []byte
	for j, item := range responsesItems(m) {
		enc, err := json.Marshal(item)
		if err != nil {
			return nil, err
		}
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, enc...)
	}
	if keep {
		call.wire[i].put(e, b)
	}
	return b, nil
}

var (
	responsesSentinel     = responses.ResponseInputItemParamOfMessage(spliceSentinel, responses.EasyInputMessageRoleUser)
	responsesSentinelJSON = mustJSON(responsesSentinel)
)

func (e *responsesEncoder) params(call modelCall, items responses.ResponseInputParam) responses.ResponseNewParams {
	p := responsesParams(call, items)
	p.MaxOutputTokens = param.Opt[int64]{}
	if limit := e.profile.outputLimit(call.model, call.maxOut, 0); limit > 0 {
		p.MaxOutputTokens = openai.Int(limit)
	}
	if call.stream {
		p.SetExtraFields(map[string]any{"stream": true})
	}
	if e.profile.responsesReasons(call.model, call.reasoning) {
		e.reason(&p, call)
	}
	return p
}

// reason asks for the call's reasoning settings and, since the gateway
// stores nothing at the provider (store: false), for the reasoning as
// encrypted content, which goes back with the turn's next request.
func (e *responsesEncoder) reason(p *responses.ResponseNewParams, call modelCall) {
	p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	a := call.reasoning
	if a.effort != "" {
		p.Reasoning.Effort = shared.ReasoningEffort(a.effort)
	}
	if a.on() && a.summary != config.SummaryNone {
		p.Reasoning.Summary = shared.ReasoningSummaryAuto
	}
}

func (c *responsesClient) complete(ctx context.Context, call modelCall) (modelAnswer, error) {
	body, err := c.encoder.encode(call)
	if err != nil {
		return modelAnswer{}, fmt.Errorf("encode Responses request: %w", err)
	}
	var httpRes *http.Response
	if err := c.client.Post(withBody(ctx, body), "responses", body, &httpRes); err != nil {
		return modelAnswer{}, err
	}
	defer func() { _ = httpRes.Body.Close() }()
	if !call.stream {
		var res responses.Response
		if err := json.NewDecoder(httpRes.Body).Decode(&res); err != nil {
			return modelAnswer{}, fmt.Errorf("error parsing response json: %w", err)
		}
		return responsesAnswer(&res)
	}
	s := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(httpRes), nil)
	defer func() { _ = s.Close() }()
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			if call.onDelta != nil {
				call.onDelta(ev.Delta)
			}
		case "response.completed", "response.incomplete", "response.failed":
			res := ev.Response
			return responsesAnswer(&res)
		case "error":
			return modelAnswer{}, &statusError{body: fmt.Sprintf(`{"error":{"message":%q,"code":%q}}`, ev.Message, ev.Code)}
		}
	}
	if err := s.Err(); err != nil {
		return modelAnswer{}, streamFailure(err)
	}
	return modelAnswer{}, garbage("the stream ended before the response was completed")
}

// responsesParams is the request with call's system messages as its
// instructions and items as its input.
func responsesParams(call modelCall, items responses.ResponseInputParam) responses.ResponseNewParams {
	p := responses.ResponseNewParams{Model: call.model, Store: openai.Bool(false)}
	var system []string
	for _, m := range call.messages {
		if m.GetRole() == "system" {
			system = append(system, m.GetContent())
		}
	}
	if len(system) > 0 {
		p.Instructions = openai.String(strings.Join(system, "\n\n"))
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	for _, t := range call.tools {
		fn := &responses.FunctionToolParam{Name: t.GetName(), Parameters: toolParameters(t.GetParametersJson()), Strict: openai.Bool(false)}
		if t.GetDescription() != "" {
			fn.Description = openai.String(t.GetDescription())
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	if call.maxOut > 0 {
		p.MaxOutputTokens = openai.Int(call.maxOut)
	}
	return p
}

// responsesItems are the input items of one message; a system message has
// none (it is part of the instructions).
func responsesItems(m *heraldpb.ChatMessage) responses.ResponseInputParam {
	var items responses.ResponseInputParam
	switch m.GetRole() {
	case "system":
	case "assistant":
		items = append(items, reasoningInputs(m)...)
		if m.GetContent() != "" {
			items = append(items, responses.ResponseInputItemParamOfMessage(m.GetContent(), responses.EasyInputMessageRoleAssistant))
		}
		for _, tc := range m.GetToolCalls() {
			items = append(items, responses.ResponseInputItemParamOfFunctionCall(tc.GetArguments(), tc.GetId(), tc.GetName()))
		}
	case "tool":
		out := responses.ResponseInputItemParamOfFunctionCallOutput(m.GetContent())
		out.OfFunctionCallOutput.CallID = openai.String(m.GetToolCallId())
		items = append(items, out)
	default:
		items = append(items, responses.ResponseInputItemParamOfMessage(m.GetContent(), responses.EasyInputMessageRoleUser))
	}
	return items
}

// responsesAnswer converts output items to the internal message: text from
// message items, tool calls from function_call items, reasoning summaries.
func responsesAnswer(res *responses.Response) (modelAnswer, error) {
	usage := responsesUsage(res.Usage)
	if res.Status == "failed" {
		err := &statusError{body: fmt.Sprintf(`{"error":{"message":%q,"code":%q}}`, res.Error.Message, res.Error.Code)}
		return modelAnswer{}, &partialError{err: err, usage: usage}
	}
	msg := &heraldpb.ChatMessage{Role: "assistant"}
	var text strings.Builder
	var reasoning []string
	var fees map[string]int64
	for _, item := range res.Output {
		switch item.Type {
		case "message":
			for _, part := range item.Content {
				text.WriteString(part.Text)
			}
		case "function_call":
			msg.ToolCalls = append(msg.ToolCalls, &heraldpb.ToolCall{Id: item.CallID, Name: item.Name, Arguments: item.Arguments.OfString})
		case "reasoning":
			reasoning = append(reasoning, reasoningParts(item)...)
			if keep := keptReasoning(item); keep != nil {
				msg.ReasoningItems = append(msg.ReasoningItems, keep)
			}
		case "web_search_call":
			if fees == nil {
				fees = map[string]int64{}
			}
			fees[pricing.FeeWebSearch]++
		}
	}
	msg.Content, msg.Reasoning = text.String(), strings.Join(reasoning, "\n\n")
	return modelAnswer{message: msg, finishReason: responsesFinish(res, msg), usage: usage, promptTokens: res.Usage.InputTokens, fees: fees}, nil
}

// responsesUsage: input_tokens include cached ones, output_tokens include
// reasoning (output_tokens_details.reasoning_tokens says how many).
func responsesUsage(u responses.ResponseUsage) *heraldpb.Usage {
	cached := u.InputTokensDetails.CachedTokens
	written := u.InputTokensDetails.CacheWriteTokens
	return &heraldpb.Usage{InputTokens: max(u.InputTokens-cached-written, 0), CacheReadTokens: cached,
		CacheWriteTokens: written, OutputTokens: u.OutputTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
}

func responsesFinish(res *responses.Response, msg *heraldpb.ChatMessage) string {
	switch {
	case res.IncompleteDetails.Reason == "max_output_tokens":
		return "length"
	case res.IncompleteDetails.Reason == "content_filter":
		return "content_filter"
	case len(msg.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}
