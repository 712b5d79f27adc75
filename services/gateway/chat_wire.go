package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// chatEncoder builds chat-completions bodies through openai-go's params,
// shaped by the endpoint's profile; tool definitions are encoded once.
type chatEncoder struct {
	profile Profile
	tools   toolMemo
	sets    keptBytes
	frames  keptBytes
}

func (e *chatEncoder) encode(call modelCall) (*requestBody, error) {
	if len(call.wire) == 0 || len(call.wire) > len(call.messages) {
		return e.whole(call)
	}
	return e.spliced(call)
}

func (e *chatEncoder) whole(call modelCall) (*requestBody, error) {
	b, err := json.Marshal(e.params(call))
	if err != nil {
		return nil, err
	}
	return bodyOf(b), nil
}

func (e *chatEncoder) params(call modelCall) openai.ChatCompletionNewParams {
	return e.paramsWith(call, chatMessagesToWire(e.profile.toolIDsFor(call.messages), e.profile.ReasoningEcho, cacheMarks(call)))
}

func (e *chatEncoder) paramsWith(call modelCall, msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return e.paramsWithTools(call, msgs, e.tools.wire(call.tools))
}

func (e *chatEncoder) paramsWithTools(call modelCall, msgs []openai.ChatCompletionMessageParamUnion,
	tools []openai.ChatCompletionToolUnionParam) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:    call.model,
		Messages: msgs,
		Tools:    tools,
	}
	if limit := e.profile.outputLimit(call.model, call.maxOut, 0); limit > 0 {
		if e.profile.MaxTokensField == FieldMaxCompletionTokens {
			p.MaxCompletionTokens = openai.Int(limit)
		} else {
			p.MaxTokens = openai.Int(limit)
		}
	}
	extra := map[string]any{}
	if call.stream {
		extra["stream"] = true
		if e.profile.StreamOptions {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
	}
	if field, value, ok := e.profile.chatReasoning(call.model, call.reasoning); ok {
		extra[field] = value
	}
	if len(extra) > 0 {
		p.SetExtraFields(extra)
	}
	return p
}

// chatMessagesToWire converts the history; echo names the assistant field
// earlier reasoning is sent back in ("" sends none).
func chatMessagesToWire(msgs []*heraldpb.ChatMessage, echo string, marks map[int]bool) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for i, m := range msgs {
		if marks[i] && m.GetContent() != "" {
			out = append(out, markedToWire(m, echo))
			continue
		}
		switch m.GetRole() {
		case "system":
			out = append(out, openai.SystemMessage(m.GetContent()))
		case "assistant":
			out = append(out, assistantToWire(m, echo))
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
func markedToWire(m *heraldpb.ChatMessage, echo string) openai.ChatCompletionMessageParamUnion {
	part := openai.ChatCompletionContentPartTextParam{Text: m.GetContent()}
	part.SetExtraFields(map[string]any{"cache_control": map[string]string{"type": "ephemeral"}})
	switch m.GetRole() {
	case "system":
		return openai.SystemMessage([]openai.ChatCompletionContentPartTextParam{part})
	case "tool":
		return openai.ToolMessage([]openai.ChatCompletionContentPartTextParam{part}, m.GetToolCallId())
	case "assistant":
		msg := assistantToWire(m, echo)
		msg.OfAssistant.Content = openai.ChatCompletionAssistantMessageParamContentUnion{
			OfArrayOfContentParts: []openai.ChatCompletionAssistantMessageParamContentArrayOfContentPartUnion{{OfText: &part}}}
		return msg
	default:
		return openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{{OfText: &part}})
	}
}

func assistantToWire(m *heraldpb.ChatMessage, echo string) openai.ChatCompletionMessageParamUnion {
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
	if echo != "" && m.GetReasoning() != "" {
		a.SetExtraFields(map[string]any{echo: m.GetReasoning()})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
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

// maxMemoTools bounds toolMemo; tools beyond it are encoded on every call.
const maxMemoTools = 1024

// toolMemo keeps each tool definition as encoded once: the same tools go
// with every step of every session, and parsing their schemas and encoding
// them again through openai-go's reflection was the largest part of
// building a request.
type toolMemo struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

// wire is chatToolsToWire with every definition sent as its stored encoding.
func (t *toolMemo) wire(specs []*heraldpb.ToolSpec) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(specs))
	for _, spec := range specs {
		raw, ok := t.encoded(spec)
		if !ok {
			out = append(out, chatToolsToWire([]*heraldpb.ToolSpec{spec})...)
			continue
		}
		fn := param.Override[openai.ChatCompletionFunctionToolParam](raw)
		out = append(out, openai.ChatCompletionToolUnionParam{OfFunction: &fn})
	}
	return out
}

func (t *toolMemo) encoded(spec *heraldpb.ToolSpec) (json.RawMessage, bool) {
	key := spec.GetName() + "\x00" + spec.GetDescription() + "\x00" + spec.GetParametersJson()
	t.mu.Lock()
	raw, ok := t.m[key]
	t.mu.Unlock()
	if ok {
		return raw, true
	}
	raw, err := json.Marshal(chatToolsToWire([]*heraldpb.ToolSpec{spec})[0])
	if err != nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]json.RawMessage{}
	}
	if len(t.m) < maxMemoTools {
		t.m[key] = raw
	}
	return raw, true
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

// spliced is the body json.Marshal(e.params(call)) gives, byte for byte,
// built from each message's own encoding: the body is encoded with one
// sentinel message in place of the history, whose bytes are then replaced
// by the messages' encodings joined by commas (an array's elements are
// encoded independently of each other and of what surrounds them). A
// message of the gateway's history that carries no cache marker is encoded
// once and its bytes kept in its wire slot.
func (e *chatEncoder) spliced(call modelCall) (*requestBody, error) {
	key, keep := frameKey(call)
	frame, ok := e.frames.get(key)
	if !ok || !keep {
		var err error
		if frame, err = e.frame(call); err != nil {
			return nil, err
		}
		if keep {
			e.frames.put(key, frame, maxKeptFrames)
		}
	}
	marks := cacheMarks(call)
	parts := make([][]byte, len(call.messages))
	for i, m := range call.messages {
		var err error
		if parts[i], err = e.message(call, i, m, marks[i]); err != nil {
			return nil, err
		}
	}
	if body, ok := spliceBody(frame, chatSentinelJSON, parts); ok {
		return body, nil
	}
	return e.whole(call) // the sentinel is not there once: encode it whole
}

// frameKey is what a body's frame (everything but its messages) depends
// on; keep says the frame may be kept: its tools are named by their set's
// digest, or it has none.
func frameKey(call modelCall) (string, bool) {
	if call.toolsKey == "" && len(call.tools) > 0 {
		return "", false
	}
	return fmt.Sprintf("%s\x00%d\x00%t\x00%s\x00%s", call.model, call.maxOut, call.stream, call.toolsKey, call.reasoning.key()), true
}

// frame is the body with one sentinel message in place of the history.
func (e *chatEncoder) frame(call modelCall) ([]byte, error) {
	sentinel := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(spliceSentinel)}
	var tools []byte
	ok := false
	if call.toolsKey != "" && len(call.tools) > 0 {
		if tools, ok = e.sets.get(call.toolsKey); !ok {
			if tools, ok = setElements(e.tools.wire(call.tools)); ok {
				e.sets.put(call.toolsKey, tools, maxKeptSets)
			}
		}
	}
	var frame []byte
	var err error
	if ok {
		// the tool set's encoding is kept too: the frame carries a sentinel tool
		frame, err = json.Marshal(e.paramsWithTools(call, sentinel, []openai.ChatCompletionToolUnionParam{chatSentinelTool}))
		if err == nil {
			frame, ok = splice(frame, chatSentinelToolJSON, [][]byte{tools})
		}
	}
	if !ok && err == nil {
		frame, err = json.Marshal(e.paramsWith(call, sentinel))
	}
	return frame, err
}

// message is the encoding of call.messages[i]; marked sends it with a
// cache marker, which only the last few messages carry, so it is not kept.
func (e *chatEncoder) message(call modelCall, i int, m *heraldpb.ChatMessage, marked bool) ([]byte, error) {
	keep := i < len(call.wire) && !marked
	if keep {
		if b, ok := call.wire[i].get(e); ok {
			return b, nil
		}
	}
	wm := e.profile.toolIDsFor([]*heraldpb.ChatMessage{m})[0]
	var b []byte
	ok := false
	if !marked {
		b, ok = chatMessageJSON(wm, e.profile.ReasoningEcho)
	}
	if !ok {
		var err error
		if b, err = json.Marshal(chatMessagesToWire([]*heraldpb.ChatMessage{wm}, e.profile.ReasoningEcho, map[int]bool{0: marked})[0]); err != nil {
			return nil, err
		}
	}
	if keep {
		call.wire[i].put(e, b)
	}
	return b, nil
}

// chatMessageJSON encodes an unmarked message as chatMessagesToWire and
// openai-go do, byte for byte (the same fields in the same order, strings
// escaped by encoding/json as openai-go's copy of it does), without
// openai-go's reflection over its parameter unions, which cost ~40 µs a
// message. It is false for an echo field that could collide with another
// field: that message goes through openai-go.
func chatMessageJSON(m *heraldpb.ChatMessage, echo string) ([]byte, bool) {
	if chatFields[echo] {
		return nil, false
	}
	b := make([]byte, 0, 64+len(m.GetContent()))
	str := func(s string) {
		q, _ := json.Marshal(s) // a string always encodes
		b = append(b, q...)
	}
	switch m.GetRole() {
	case "system", "tool":
		b = append(b, `{"content":`...)
		str(m.GetContent())
		if m.GetRole() == "tool" {
			b = append(b, `,"tool_call_id":`...)
			str(m.GetToolCallId())
		}
		b = append(b, `,"role":"`...)
		b = append(b, m.GetRole()...)
		b = append(b, `"}`...)
	case "assistant":
		b = append(b, '{')
		calls := m.GetToolCalls()
		if m.GetContent() != "" || len(calls) == 0 {
			b = append(b, `"content":`...)
			str(m.GetContent())
			b = append(b, ',')
		}
		if len(calls) > 0 {
			b = append(b, `"tool_calls":[`...)
			for i, tc := range calls {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				str(tc.GetId())
				if tc.GetArguments() != "" || tc.GetName() != "" { // openai-go leaves a zero function out
					b = append(b, `,"function":{"arguments":`...)
					str(tc.GetArguments())
					b = append(b, `,"name":`...)
					str(tc.GetName())
					b = append(b, '}')
				}
				b = append(b, `,"type":"function"}`...)
			}
			b = append(b, "],"...)
		}
		b = append(b, `"role":"assistant"`...)
		if echo != "" && m.GetReasoning() != "" {
			b = append(b, ',')
			str(echo)
			b = append(b, ':')
			str(m.GetReasoning())
		}
		b = append(b, '}')
	default:
		b = append(b, `{"content":`...)
		str(m.GetContent())
		b = append(b, `,"role":"user"}`...)
	}
	return b, true
}

// chatFields are the fields of openai-go's chat message parameters.
var chatFields = map[string]bool{"content": true, "role": true, "tool_calls": true, "tool_call_id": true, "name": true,
	"refusal": true, "audio": true, "function_call": true}

var chatSentinelJSON = mustJSON(openai.UserMessage(spliceSentinel))

// chatSentinelTool stands in a frame for a tool set whose encoding is kept.
var (
	chatSentinelTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: spliceSentinel,
		Parameters: map[string]any{"type": "object"}})
	chatSentinelToolJSON = mustJSON(chatSentinelTool)
)

// Bounds of the kept encodings: frames by frameKey, tool sets by digest.
const (
	maxKeptFrames = 256
	maxKeptSets   = 64
)

// keptBytes keeps encodings by key, at most max of them (a full map is
// emptied): a chat encoder keeps bodies' frames (the model, output limit
// and tool set are the same on every step of a session, and even a frame
// encoded through openai-go's reflection cost more than splicing the body)
// and whole tool sets' encodings (the elements of a body's "tools" array,
// joined), keyed by the set's digest (LLMRequest.tools_digest).
type keptBytes struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *keptBytes) get(key string) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.m[key]
	return b, ok
}

func (k *keptBytes) put(key string, b []byte, max int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= max {
		k.m = map[string][]byte{}
	}
	k.m[key] = b
}

// setElements is the encoding of a tool set's elements, joined.
func setElements(tools []openai.ChatCompletionToolUnionParam) ([]byte, bool) {
	arr, err := json.Marshal(tools)
	if err != nil || len(arr) < 2 {
		return nil, false
	}
	return arr[1 : len(arr)-1], true
}
