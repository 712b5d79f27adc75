package gateway

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// chatResponse is a whole chat-completions answer as providers send it,
// including the fields outside OpenAI's schema that profiles know about.
type chatResponse struct {
	Choices []struct {
		Message      chatWireMessage `json:"message"`
		FinishReason string          `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatWireUsage  `json:"usage"`
	Error json.RawMessage `json:"error"`
	XGroq *struct {
		Usage *chatWireUsage `json:"usage"`
	} `json:"x_groq"`
}

// chatChunk is one event of a streamed answer.
type chatChunk struct {
	Choices []struct {
		Delta        chatWireMessage `json:"delta"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatWireUsage  `json:"usage"`
	Error json.RawMessage `json:"error"`
	// XGroq carries Groq's copy of the usage in the finish chunk.
	XGroq *struct {
		Usage *chatWireUsage `json:"usage"`
	} `json:"x_groq"`
}

// chatWireMessage is a message or a delta. Content is a string or, from
// Mistral's reasoning models, a list of typed chunks; reasoning arrives in
// reasoning_content (DeepSeek, vLLM, Groq's parsed format) or reasoning
// (OpenRouter, Ollama).
type chatWireMessage struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	Refusal          json.RawMessage `json:"refusal"`
	ToolCalls        []chatWireCall  `json:"tool_calls"`
}

type chatWireCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatDecoder assembles one answer under a profile's rules.
type chatDecoder struct {
	profile   Profile
	onDelta   func(string)
	text      strings.Builder
	reasoning strings.Builder
	think     thinkSplitter
	tagged    strings.Builder // reasoning read from <think> tags
	calls     []*heraldpb.ToolCall
	atIndex   map[int]*heraldpb.ToolCall // the call a wire index continues
	refusal   strings.Builder
	reason    string
	usage     *chatWireUsage
}

// newChatDecoder: text reaches onDelta only when the answer is streamed
// (a whole answer is shown by the caller, once).
func newChatDecoder(p Profile, call modelCall) *chatDecoder {
	d := &chatDecoder{profile: p}
	if call.stream {
		d.onDelta = call.onDelta
	}
	return d
}

// whole reads a non-streamed answer.
func (d *chatDecoder) whole(r chatResponse) (modelAnswer, error) {
	if len(r.Error) > 0 && string(r.Error) != "null" {
		return modelAnswer{}, inBandError(r.Error)
	}
	if len(r.Choices) == 0 {
		return modelAnswer{}, garbage("the response holds no choices")
	}
	ch := r.Choices[0]
	d.addMessage(ch.Message, false)
	for _, tc := range ch.Message.ToolCalls {
		d.calls = append(d.calls, &heraldpb.ToolCall{Id: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	d.report(r.Usage)
	if r.XGroq != nil {
		d.report(r.XGroq.Usage)
	}
	d.reason = ch.FinishReason
	if d.reason == "" {
		d.reason = "stop"
	}
	return d.answer(), nil
}

// chunk applies one streamed event. Usage is taken before an in-band
// error, so an attempt that fails after its usage was reported is billed.
func (d *chatDecoder) chunk(data []byte) error {
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		if strings.HasPrefix(strings.TrimSpace(string(data)), "[DONE]") {
			return nil
		}
		return garbage("unreadable stream chunk: %v", err)
	}
	d.report(c.Usage)
	if c.XGroq != nil {
		d.report(c.XGroq.Usage)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return inBandError(c.Error)
	}
	for _, ch := range c.Choices {
		d.addMessage(ch.Delta, true)
		d.addCallDeltas(ch.Delta.ToolCalls)
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.reason = *ch.FinishReason
		}
	}
	return nil
}

// failed is a stream that broke: its error, with the usage reported so far.
func (d *chatDecoder) failed(err error) (modelAnswer, error) {
	if d.usage != nil {
		u, _ := d.profile.normalise(*d.usage)
		return modelAnswer{}, &partialError{err: streamFailure(err), usage: u}
	}
	return modelAnswer{}, streamFailure(err)
}

func (d *chatDecoder) finish() (modelAnswer, error) {
	if d.reason == "" {
		return d.failed(garbage("the stream ended before the model finished its answer"))
	}
	return d.answer(), nil
}

// addMessage takes a message's or delta's text and reasoning; streamed
// answer text goes to onDelta as it arrives, reasoning never does.
func (d *chatDecoder) addMessage(m chatWireMessage, streamed bool) {
	text, reasoning := contentParts(m.Content)
	reasoning = rawText(m.ReasoningContent) + rawText(m.Reasoning) + reasoning
	if d.profile.ThinkTags {
		var inline string
		text, inline = d.think.feed(text)
		d.tagged.WriteString(inline)
	}
	d.reasoning.WriteString(reasoning)
	d.refusal.WriteString(rawText(m.Refusal))
	d.text.WriteString(text)
	if streamed && text != "" && d.onDelta != nil {
		d.onDelta(text)
	}
}

// addCallDeltas assembles streamed tool calls: a delta names its call by
// index; a delta without one starts a new call when it has an id or name.
// A new id at an index already holding another call starts a new call:
// Ollama streams every call at index 0 with its own id, and merged by index
// two read_file calls would become one named "read_fileread_file".
func (d *chatDecoder) addCallDeltas(deltas []chatWireCall) {
	for _, tc := range deltas {
		var call *heraldpb.ToolCall
		switch {
		case tc.Index != nil && *tc.Index >= 0 && *tc.Index < 1024:
			if d.atIndex == nil {
				d.atIndex = map[int]*heraldpb.ToolCall{}
			}
			call = d.atIndex[*tc.Index]
			if call == nil || (tc.ID != "" && call.Id != "" && call.Id != tc.ID) {
				call = &heraldpb.ToolCall{}
				d.calls = append(d.calls, call)
				d.atIndex[*tc.Index] = call
			}
		case tc.ID != "" || tc.Function.Name != "" || len(d.calls) == 0:
			call = &heraldpb.ToolCall{}
			d.calls = append(d.calls, call)
		default:
			call = d.calls[len(d.calls)-1]
		}
		if tc.ID != "" {
			call.Id = tc.ID
		}
		if tc.Function.Name != "" {
			call.Name = tc.Function.Name
		}
		call.Arguments += tc.Function.Arguments
	}
}

// report combines one usage report with those before it.
func (d *chatDecoder) report(u *chatWireUsage) {
	if u == nil {
		return
	}
	if d.usage == nil {
		cp := *u
		d.usage = &cp
		return
	}
	if d.profile.Usage == UsageDelta {
		d.usage.add(*u)
		return
	}
	d.usage.overwrite(*u)
}

func (d *chatDecoder) answer() modelAnswer {
	if d.profile.ThinkTags {
		text, inline := d.think.flush()
		d.text.WriteString(text)
		d.tagged.WriteString(inline)
		d.splitOrphanClose()
		d.reasoning.WriteString(strings.TrimSpace(d.tagged.String()))
		if d.onDelta != nil && text != "" {
			d.onDelta(text)
		}
	}
	calls := d.calls[:0]
	for _, c := range d.calls {
		if c.Name != "" || c.Arguments != "" {
			calls = append(calls, c)
		}
	}
	msg := &heraldpb.ChatMessage{Role: "assistant", Content: d.text.String(), Reasoning: d.reasoning.String(), ToolCalls: calls}
	var usage *heraldpb.Usage
	var prompt int64
	var fees map[string]int64
	if d.usage != nil {
		usage, prompt = d.profile.normalise(*d.usage)
		fees = d.usage.fees()
	} else {
		usage = &heraldpb.Usage{}
	}
	return asRefusal(modelAnswer{message: msg, finishReason: d.reason, usage: usage, promptTokens: prompt, fees: fees}, d.refusal.String())
}

// contentParts reads content that is a string or a list of typed chunks:
// text chunks are the answer, thinking chunks (Mistral's Magistral: a
// "thinking" list of text chunks, or a string) are reasoning.
func contentParts(raw json.RawMessage) (text, reasoning string) {
	if s := rawText(raw); s != "" || len(raw) == 0 || raw[0] != '[' {
		return s, ""
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", ""
	}
	var t, r strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "thinking", "reasoning":
			if s := rawText(p.Thinking); s != "" {
				r.WriteString(s)
				continue
			}
			inner, _ := contentParts(p.Thinking)
			r.WriteString(inner)
		case "text", "":
			t.WriteString(p.Text)
		}
	}
	return t.String(), r.String()
}

// rawText is raw as a JSON string; "" for null, absent or not a string.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// inBandError is an error a provider sent inside a 200 answer (OpenRouter's
// mid-stream error chunk); a numeric code is read as the HTTP status.
func inBandError(raw json.RawMessage) error {
	var e struct {
		Code json.RawMessage `json:"code"`
	}
	_ = json.Unmarshal(raw, &e)
	status, _ := strconv.Atoi(strings.Trim(string(e.Code), `"`))
	if status < 400 || status > 599 {
		status = 0
	}
	return &statusError{status: status, body: `{"error":` + string(raw) + `}`}
}

// splitOrphanClose handles answers whose opening <think> was part of the
// prompt (chat templates that end in "<think>\n"): the answer holds only
// the closing tag, and what precedes it is the reasoning. A streamed answer
// has already shown that text; the message kept is split all the same.
func (d *chatDecoder) splitOrphanClose() {
	if d.tagged.Len() > 0 {
		return
	}
	text := d.text.String()
	i := strings.Index(text, thinkClose)
	if i < 0 {
		return
	}
	d.tagged.WriteString(text[:i])
	d.text.Reset()
	d.text.WriteString(strings.TrimLeft(text[i+len(thinkClose):], " \t\r\n"))
}
