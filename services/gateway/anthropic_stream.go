package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
)

// anthropicEvent is the union of the Messages API's stream events.
type anthropicEvent struct {
	Type         string               `json:"type"`
	Index        int                  `json:"index"`
	Message      anthropicResponse    `json:"message"`
	ContentBlock anthropicOutputBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

// anthropicStream assembles a streamed message from its events.
type anthropicStream struct {
	blocks  []*anthropicOutputBlock
	args    map[int]*strings.Builder
	stop    string
	usage   anthropicUsage
	done    bool
	onDelta func(string)
}

// readAnthropicStream assembles a streamed message. A stream that breaks
// after message_start reported usage carries that usage in its error.
func readAnthropicStream(body io.Reader, onDelta func(string)) (modelAnswer, error) {
	st := &anthropicStream{args: map[int]*strings.Builder{}, onDelta: onDelta}
	ans, err := st.read(body)
	if err != nil && st.usage != (anthropicUsage{}) {
		return modelAnswer{}, &partialError{err: err, usage: st.usage.normalised()}
	}
	return ans, err
}

func (st *anthropicStream) read(body io.Reader) (modelAnswer, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data.Len() > 0 {
				if err := st.apply(data.Bytes()); err != nil {
					return modelAnswer{}, err
				}
				data.Reset()
			}
		case bytes.HasPrefix(line, []byte("data:")):
			data.Write(bytes.TrimSpace(line[len("data:"):]))
		}
	}
	if err := sc.Err(); err != nil {
		return modelAnswer{}, err
	}
	if data.Len() > 0 {
		if err := st.apply(data.Bytes()); err != nil {
			return modelAnswer{}, err
		}
	}
	if !st.done {
		return modelAnswer{}, garbage("the stream ended before the message was complete")
	}
	return st.answer()
}

func (st *anthropicStream) apply(data []byte) error {
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return garbage("unreadable stream event: %v", err)
	}
	switch ev.Type {
	case "message_start":
		st.usage = ev.Message.Usage
	case "content_block_start":
		return st.start(ev)
	case "content_block_delta":
		return st.delta(ev)
	case "message_delta":
		st.stop = ev.Delta.StopReason
		st.mergeUsage(ev.Usage)
	case "message_stop":
		st.done = true
	case "error":
		return &statusError{body: string(data)}
	}
	return nil
}

func (st *anthropicStream) start(ev anthropicEvent) error {
	if ev.Index != len(st.blocks) {
		return garbage("stream block %d started out of order", ev.Index)
	}
	b := ev.ContentBlock
	st.blocks = append(st.blocks, &b)
	if b.Type == "tool_use" {
		st.args[ev.Index] = &strings.Builder{}
	}
	return nil
}

func (st *anthropicStream) delta(ev anthropicEvent) error {
	if ev.Index < 0 || ev.Index >= len(st.blocks) {
		return garbage("stream delta for unknown block %d", ev.Index)
	}
	b := st.blocks[ev.Index]
	switch ev.Delta.Type {
	case "text_delta":
		b.Text += ev.Delta.Text
		if st.onDelta != nil && ev.Delta.Text != "" {
			st.onDelta(ev.Delta.Text)
		}
	case "thinking_delta":
		b.Thinking += ev.Delta.Thinking
	case "signature_delta":
		b.Signature += ev.Delta.Signature
	case "input_json_delta":
		if args := st.args[ev.Index]; args != nil {
			args.WriteString(ev.Delta.PartialJSON)
		}
	}
	return nil
}

// mergeUsage takes message_delta's cumulative counts; input counts appear
// there only on some API versions, so zero means "unchanged".
func (st *anthropicStream) mergeUsage(u anthropicUsage) {
	if u.OutputTokens > 0 {
		st.usage.OutputTokens = u.OutputTokens
	}
	if u.InputTokens > 0 {
		st.usage.InputTokens = u.InputTokens
	}
	if u.CacheReadInputTokens > 0 {
		st.usage.CacheReadInputTokens = u.CacheReadInputTokens
	}
	if u.CacheCreationInputTokens > 0 {
		st.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
	}
	if u.OutputTokensDetails.ThinkingTokens > 0 {
		st.usage.OutputTokensDetails = u.OutputTokensDetails
	}
	if u.ServerToolUse.WebSearchRequests > 0 {
		st.usage.ServerToolUse = u.ServerToolUse
	}
}

func (st *anthropicStream) answer() (modelAnswer, error) {
	msg := anthropicResponse{Type: "message", StopReason: st.stop, Usage: st.usage}
	for i, b := range st.blocks {
		if args := st.args[i]; args != nil {
			b.Input = json.RawMessage(args.String())
			if args.Len() == 0 {
				b.Input = json.RawMessage(`{}`)
			}
		}
		msg.Content = append(msg.Content, *b)
	}
	if msg.StopReason == "" {
		return modelAnswer{}, garbage("the stream finished without a stop reason")
	}
	return msg.answer()
}
