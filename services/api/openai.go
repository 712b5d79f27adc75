package api

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/heraldrun/herald/proto"
)

// What the OpenAI-compatible routes share: reading a conversation from a
// message list, the usage shapes, and waiting for a turn.

// message is one item of a Chat Completions messages list or a Responses
// input list.
type message struct {
	Type    string          `json:"type,omitempty"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
	// Fields of tool traffic, refused: Herald's tools run server side.
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ID         string          `json:"id,omitempty"`
	Status     string          `json:"status,omitempty"`
}

// contentPart is one part of a message's content list.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// text is a message's content as plain text: a string, or its text parts.
func (m message) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", invalid("invalid_content", "a message's content must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		default:
			return "", invalid("unsupported_content", "content parts of type %q are not supported yet; send text", p.Type)
		}
	}
	return b.String(), nil
}

// conversation is what a Herald turn takes from a message list: the last
// user message is the prompt; system and developer messages become the
// system message; earlier turns are told to a new session as context (a
// continued session has them already).
type conversation struct {
	prompt  string
	system  []string
	earlier []string
}

func readConversation(msgs []message) (conversation, error) {
	var c conversation
	last := -1
	for i, m := range msgs {
		if m.Type != "" && m.Type != "message" {
			return c, toolsRefused("input items of type " + m.Type)
		}
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Role == "tool" || m.Role == "function" {
			return c, toolsRefused("tool messages")
		}
		if m.Role == "user" {
			last = i
		}
	}
	if last < 0 || last != len(msgs)-1 {
		return c, invalid("invalid_messages", "the last message must be the user's: Herald runs a turn on it")
	}
	for i, m := range msgs {
		text, err := m.text()
		if err != nil {
			return c, err
		}
		switch {
		case i == last:
			c.prompt = text
		case m.Role == "system" || m.Role == "developer":
			c.system = append(c.system, text)
		case m.Role == "user" || m.Role == "assistant":
			c.earlier = append(c.earlier, m.Role+": "+text)
		default:
			return c, invalid("invalid_messages", "message role %q is not one of system, developer, user, assistant", m.Role)
		}
	}
	if strings.TrimSpace(c.prompt) == "" {
		return c, invalid("invalid_messages", "the last user message is empty")
	}
	return c, nil
}

// task is the conversation as a task; newSession tells it the earlier turns.
func (c conversation) task(instructions string, newSession bool) proto.Task {
	prompt := c.prompt
	if newSession && len(c.earlier) > 0 {
		prompt = "Earlier in this conversation:\n" + strings.Join(c.earlier, "\n") + "\n\nNow:\n" + c.prompt
	}
	system := c.system
	if instructions != "" {
		system = append([]string{instructions}, system...)
	}
	return proto.Task{Prompt: prompt, SystemMessage: strings.Join(system, "\n\n")}
}

func toolsRefused(what string) *apiError {
	return invalid("tools_unsupported", "%s are not supported: Herald runs its own tools server side, and client-defined tools are refused until they are supported", what)
}

// herald is the model name that means "Herald's configured model".
const herald = "herald"

func taskModel(model string) string {
	if model == herald {
		return ""
	}
	return model
}

// checkMetadata applies OpenAI's limits: 16 pairs, keys of 64 and values
// of 512 characters at most.
func checkMetadata(md map[string]string) error {
	if len(md) > 16 {
		return invalid("invalid_metadata", "metadata holds at most 16 pairs")
	}
	for k, v := range md {
		if len(k) > 64 || len(v) > 512 {
			return invalid("invalid_metadata", "metadata keys are at most 64 characters and values 512")
		}
	}
	return nil
}

// waitResult follows the run's events until its result: from the result
// event, or from the durable result should the event never come.
func (s *Service) waitResult(ctx context.Context, rn *run, each func(sessionEvent)) (*proto.Result, error) {
	reader, err := s.readEvents(ctx, rn, 0)
	if err != nil {
		return nil, err
	}
	defer reader.close()
	for {
		ev, ok, err := reader.next(ctx, 2*time.Second)
		if err != nil {
			return nil, err
		}
		if ok {
			if each != nil {
				each(ev)
			}
			if ev.isEnd() && ev.Ev.Result != nil {
				return ev.Ev.Result, nil
			}
			continue
		}
		res, err := s.runs.result(ctx, rn)
		if err != nil && !errors.Is(err, errUnavailable) {
			return nil, err
		}
		if res != nil {
			return res, nil
		}
	}
}

// promptTokens is what OpenAI calls input or prompt tokens: all of them,
// cached and cache-written included.
func promptTokens(u proto.Usage) int64 { return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens }
