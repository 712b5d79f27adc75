package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto/heraldpb"
)

// anthropicClient speaks the Anthropic Messages API over plain HTTP. The
// wire format is small (one POST, JSON or SSE), and owning it keeps the
// prompt-caching markers exactly where Herald puts them and lets every
// failure pass through the same status capture as the openai-go modes,
// without a second provider SDK in the gateway.
type anthropicClient struct {
	ep      endpoint
	hc      *http.Client
	url     string
	encoder requestEncoder
}

// anthropicEncoder builds Messages API bodies; max_tokens (required by the
// API) is the caller's limit or the default, bounded by the model family's
// cap (Claude 3 Haiku and Opus refuse more than 4096).
type anthropicEncoder struct{ profile Profile }

func (e *anthropicEncoder) encode(call modelCall) (*requestBody, error) {
	call.thinkBack = e.profile.anthropicThinks(call.model)
	if len(call.wire) == 0 || len(call.wire) > len(call.messages) {
		return e.whole(call)
	}
	return e.spliced(call)
}

func (e *anthropicEncoder) whole(call modelCall) (*requestBody, error) {
	call.thinkBack = e.profile.anthropicThinks(call.model)
	body := anthropicBody(call)
	e.limits(&body, call)
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return bodyOf(b), nil
}

const (
	anthropicVersion = "2023-06-01"
	// defaultMaxTokens: the Messages API requires max_tokens on every call.
	defaultMaxTokens = 8192
	// cachedTail is how many trailing non-system messages get a cache marker
	// (with the system prompt: Anthropic's limit of four breakpoints).
	cachedTail = 3
)

func newAnthropicClient(ep endpoint, hc *http.Client) *anthropicClient {
	url := ep.baseURL + "/v1/messages"
	if strings.HasSuffix(ep.baseURL, "/v1") {
		url = ep.baseURL + "/messages"
	}
	return &anthropicClient{ep: ep, hc: hc, url: url, encoder: &anthropicEncoder{profile: ep.profile}}
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int64              `json:"max_tokens"`
	Thinking  *anthropicThinking `json:"thinking,omitempty"`
	System    []anthropicBlock   `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
	Stream    bool               `json:"stream,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      string          `json:"content,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
	// Thinking and Signature are a thinking block's, Data a redacted one's,
	// sent back as the model produced them.
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type anthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"input_schema"`
}

func (c *anthropicClient) complete(ctx context.Context, call modelCall) (modelAnswer, error) {
	body, err := c.encoder.encode(call)
	if err != nil {
		return modelAnswer{}, fmt.Errorf("encode Anthropic request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, nil)
	if err != nil {
		return modelAnswer{}, fmt.Errorf("build Anthropic request: %w", err)
	}
	body.attach(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", anthropicVersion)
	if c.encoder.(*anthropicEncoder).interleaved(call) {
		req.Header.Set("Anthropic-Beta", interleavedThinkingBeta)
	}
	req.Header.Set("X-Api-Key", c.ep.keyOrPlaceholder())
	res, err := captureStatus(c.hc.Do(req))
	if err != nil {
		return modelAnswer{}, err
	}
	defer func() { _ = res.Body.Close() }()
	if call.stream {
		return readAnthropicStream(res.Body, call.onDelta)
	}
	var msg anthropicResponse
	if err := json.NewDecoder(res.Body).Decode(&msg); err != nil {
		return modelAnswer{}, fmt.Errorf("error parsing response json: %w", err)
	}
	return msg.answer()
}

// anthropicBody converts the internal history: system messages become the
// system blocks, tool results user turns, consecutive same-role turns merge
// (the API requires alternation), and prompt-caching markers are placed.
func anthropicBody(call modelCall) anthropicRequest {
	r := anthropicRequest{Model: call.model, MaxTokens: call.maxOut, Stream: call.stream}
	if r.MaxTokens <= 0 {
		r.MaxTokens = defaultMaxTokens
	}
	for _, m := range call.messages {
		if m.GetRole() == "system" {
			if m.GetContent() != "" {
				r.System = append(r.System, anthropicBlock{Type: "text", Text: m.GetContent()})
			}
			continue
		}
		role, blocks := anthropicTurn(m, call.thinkBack)
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
			continue
		}
		r.Messages = append(r.Messages, anthropicMessage{Role: role, Content: blocks})
	}
	for _, t := range call.tools {
		r.Tools = append(r.Tools, anthropicTool{Name: t.GetName(), Description: t.GetDescription(), InputSchema: toolParameters(t.GetParametersJson())})
	}
	markCache(&r)
	return r
}

func anthropicTurn(m *heraldpb.ChatMessage, thinkBack bool) (string, []anthropicBlock) {
	switch m.GetRole() {
	case "tool":
		return "user", []anthropicBlock{{Type: "tool_result", ToolUseID: m.GetToolCallId(), Content: m.GetContent()}}
	case "assistant":
		var blocks []anthropicBlock
		if thinkBack {
			blocks = thinkingBlocks(m)
		}
		if m.GetContent() != "" {
			blocks = append(blocks, anthropicBlock{Type: "text", Text: m.GetContent()})
		}
		for _, tc := range m.GetToolCalls() {
			blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: tc.GetId(), Name: tc.GetName(), Input: toolInput(tc.GetArguments())})
		}
		if len(blocks) == 0 || isThinking(blocks[len(blocks)-1]) {
			blocks = append(blocks, anthropicBlock{Type: "text", Text: "(empty)"})
		}
		return "assistant", blocks
	default:
		text := m.GetContent()
		if strings.TrimSpace(text) == "" {
			text = "(empty)"
		}
		return "user", []anthropicBlock{{Type: "text", Text: text}}
	}
}

// toolInput is a tool call's arguments as the JSON object the API requires;
// arguments that are not an object (the model's own mistake) become {}.
func toolInput(args string) json.RawMessage {
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(args)
}

// markCache puts cache_control on the system prompt and on the last block of
// each of the last three non-system messages, so a growing conversation
// re-reads its prefix from the cache.
func markCache(r *anthropicRequest) {
	ephemeral := &cacheControl{Type: "ephemeral"}
	if n := len(r.System); n > 0 {
		r.System[n-1].CacheControl = ephemeral
	}
	for i := max(len(r.Messages)-cachedTail, 0); i < len(r.Messages); i++ {
		blocks := r.Messages[i].Content
		blocks[len(blocks)-1].CacheControl = ephemeral
	}
}

type anthropicResponse struct {
	Type       string                 `json:"type"`
	Content    []anthropicOutputBlock `json:"content"`
	StopReason string                 `json:"stop_reason"`
	Usage      anthropicUsage         `json:"usage"`
}

type anthropicOutputBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// OutputTokensDetails.ThinkingTokens says how many of output_tokens were
	// thinking, where the API reports it.
	OutputTokensDetails struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
	// ServerToolUse counts the server tools the model ran (priced as fees).
	ServerToolUse struct {
		WebSearchRequests int64 `json:"web_search_requests"`
	} `json:"server_tool_use"`
}

func (r anthropicResponse) answer() (modelAnswer, error) {
	if r.Type != "message" || r.StopReason == "" {
		return modelAnswer{}, garbage("the response is not a complete Anthropic message")
	}
	msg := &heraldpb.ChatMessage{Role: "assistant"}
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			msg.Content += b.Text
		case "thinking", "redacted_thinking":
			msg.Reasoning += b.Thinking
			msg.ReasoningItems = append(msg.ReasoningItems, b.reasoningItem())
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, &heraldpb.ToolCall{Id: b.ID, Name: b.Name, Arguments: string(b.Input)})
		}
	}
	return modelAnswer{message: msg, finishReason: anthropicFinish(r.StopReason), usage: r.Usage.normalised(),
		promptTokens: r.Usage.prompt(), fees: r.Usage.fees()}, nil
}

// normalised: Anthropic reports uncached input, cache writes and cache reads
// separately (they add up to the prompt); thinking is part of output_tokens
// (billed as output), so its count is recorded and not added again.
func (u anthropicUsage) normalised() *heraldpb.Usage {
	return &heraldpb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens,
		ReasoningTokens: min(u.OutputTokensDetails.ThinkingTokens, u.OutputTokens)}
}

// fees are the server tools the model ran, by fee name.
func (u anthropicUsage) fees() map[string]int64 {
	if u.ServerToolUse.WebSearchRequests <= 0 {
		return nil
	}
	return map[string]int64{pricing.FeeWebSearch: u.ServerToolUse.WebSearchRequests}
}

func (u anthropicUsage) prompt() int64 {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

func anthropicFinish(stop string) string {
	switch stop {
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "length"
	case "refusal":
		return "content_filter"
	default:
		return "stop"
	}
}
