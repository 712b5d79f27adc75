package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// thinkingSteps answers an Anthropic session with thinking on: each of the
// first three steps thinks (a block signed sig-N, and a redacted block
// red-N) and reads a file; the fourth answers.
func thinkingSteps(r *scripted.Request) scripted.Reply {
	n := r.AssistantCount() + 1
	if n > 3 {
		return scripted.Reply{Content: "All three read.", Reasoning: "Done reading.", Signature: "sig-final"}
	}
	return scripted.Reply{Reasoning: fmt.Sprintf("Step %d: read the next file.", n),
		Signature: fmt.Sprintf("sig-%d", n), RedactedThinking: fmt.Sprintf("red-%d", n),
		ToolCalls: []scripted.Call{{Name: "read_file", Args: fmt.Sprintf(`{"path":"note%d.txt"}`, n)}}}
}

type sentBlock struct {
	Type      string          `json:"type"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Input     json.RawMessage `json:"input"`
}

type sentBody struct {
	MaxTokens int64 `json:"max_tokens"`
	Thinking  *struct {
		Type         string `json:"type"`
		BudgetTokens int64  `json:"budget_tokens"`
	} `json:"thinking"`
	Messages []struct {
		Role    string      `json:"role"`
		Content []sentBlock `json:"content"`
	} `json:"messages"`
}

// TestThinkingBlocksCarriedThroughEveryToolStep runs a session through the
// real bus (loop, gateway, tool runner) against an Anthropic-speaking model
// with thinking on and three tool calls: every request after a tool step
// carries each earlier step's thinking and redacted_thinking blocks, with
// their signatures unchanged, at the head of the assistant turn they belong
// to, and every request asks for thinking.
func TestThinkingBlocksCarriedThroughEveryToolStep(t *testing.T) {
	h := Start(t, thinkingSteps, WithConfig(func(c *config.Config) {
		c.Primary = config.Provider{Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: c.Primary.BaseURL,
			APIMode: "anthropic_messages"}
		c.Pricing = map[string]config.Price{"claude-sonnet-4-5": {Input: 3, Output: 15}}
	}))
	for i := 1; i <= 3; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(h.Workspace, fmt.Sprintf("note%d.txt", i)), []byte("tea"), 0o644))
	}
	task := NewTask("Read the three notes.")
	task.ReasoningEffort = "high"
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
	require.Equal(t, "All three read.", res.FinalResponse)

	reqs := h.Model.Requests()
	require.Len(t, reqs, 4)
	for step, req := range reqs {
		var body sentBody
		require.NoError(t, json.Unmarshal(req.Raw, &body))
		require.NotNil(t, body.Thinking, "request %d asks for thinking", step+1)
		require.Equal(t, int64(16384), body.Thinking.BudgetTokens, "--reasoning high is a 16,384-token budget")
		require.Equal(t, int64(16384+8192), body.MaxTokens)
		require.Equal(t, "interleaved-thinking-2025-05-14", req.Header.Get("Anthropic-Beta"))

		var turns [][]sentBlock
		for _, m := range body.Messages {
			if m.Role == "assistant" {
				turns = append(turns, m.Content)
			}
		}
		require.Len(t, turns, step, "request %d carries every earlier assistant turn", step+1)
		for k, blocks := range turns {
			n := k + 1
			require.GreaterOrEqual(t, len(blocks), 3, "turn %d: %+v", n, blocks)
			require.Equal(t, sentBlock{Type: "thinking", Thinking: fmt.Sprintf("Step %d: read the next file.", n),
				Signature: fmt.Sprintf("sig-%d", n)}, blocks[0], "request %d, turn %d: the thinking block as signed", step+1, n)
			require.Equal(t, sentBlock{Type: "redacted_thinking", Data: fmt.Sprintf("red-%d", n)}, blocks[1])
			last := blocks[len(blocks)-1]
			require.Equal(t, "tool_use", last.Type, "the blocks belong to the turn of their tool call")
			require.JSONEq(t, fmt.Sprintf(`{"path":"note%d.txt"}`, n), string(last.Input))
		}
	}

	// the transcript keeps them too: a later turn (or another loop) sends them back
	var kept int
	for _, m := range h.Transcript(task.SessionID) {
		kept += len(m.GetReasoningItems())
	}
	require.Equal(t, 3*2+1, kept, "three steps of two blocks, and the answer's")
}

// TestEncryptedReasoningCarriedThroughEveryToolStep is the Responses API's
// form: with store: false every request asks for encrypted reasoning, and
// carries each earlier step's reasoning item, unchanged, before its call.
func TestEncryptedReasoningCarriedThroughEveryToolStep(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		n := r.AssistantCount() + 1
		if n > 3 {
			return scripted.Text("All three read.")
		}
		return scripted.Reply{Reasoning: fmt.Sprintf("Step %d.", n), Signature: fmt.Sprintf("enc-%d", n),
			ToolCalls: []scripted.Call{{Name: "read_file", Args: fmt.Sprintf(`{"path":"note%d.txt"}`, n)}}}
	}, WithConfig(func(c *config.Config) {
		c.Primary = config.Provider{Provider: "openai", Model: "gpt-5-mini", BaseURL: c.Primary.BaseURL, APIMode: "codex_responses"}
		c.Providers = map[string]config.ProviderProfile{"openai": {Profile: "openai"}}
		c.Pricing = map[string]config.Price{"gpt-5-mini": {Input: 0.25, Output: 2}}
	}))
	task := NewTask("Read the three notes.")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)

	reqs := h.Model.Requests()
	require.Len(t, reqs, 4)
	for step, req := range reqs {
		var body struct {
			Store   bool              `json:"store"`
			Include []string          `json:"include"`
			Input   []json.RawMessage `json:"input"`
		}
		require.NoError(t, json.Unmarshal(req.Raw, &body))
		require.False(t, body.Store)
		require.Equal(t, []string{"reasoning.encrypted_content"}, body.Include, "request %d", step+1)
		var order []string
		for _, raw := range body.Input {
			var it struct {
				Type             string `json:"type"`
				EncryptedContent string `json:"encrypted_content"`
			}
			require.NoError(t, json.Unmarshal(raw, &it))
			switch it.Type {
			case "reasoning":
				order = append(order, it.EncryptedContent)
			case "function_call":
				order = append(order, "call")
			}
		}
		var want []string
		for n := 1; n <= step; n++ {
			want = append(want, fmt.Sprintf("enc-%d", n), "call")
		}
		require.Equal(t, want, order, "request %d: each step's encrypted reasoning before its call", step+1)
	}
}

// TestAnthropicPromptTooLongCompressesAndKeepsThinking: Anthropic's 400
// "prompt is too long: N tokens > M maximum" in a thinking session is a
// context overflow: the loop compresses and asks again, and the request
// after compression still carries the signed thinking block of the tool
// turn it continues, with thinking on.
func TestAnthropicPromptTooLongCompressesAndKeepsThinking(t *testing.T) {
	h := Start(t, func(r *scripted.Request) scripted.Reply {
		if len(r.Tools) == 0 {
			return scripted.Text("## Goal\nRead.\n## Remaining work\nAnswer.")
		}
		if n := lastFileRead(r); n < 2 {
			return scripted.Reply{Reasoning: fmt.Sprintf("Read file %d next.", n+1), Signature: fmt.Sprintf("sig-%d", n+1),
				ToolCalls: []scripted.Call{{Name: "read_file", Args: fmt.Sprintf(`{"path":"f%d.txt"}`, n+1)}}}
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Text(), "file 1 line 0") {
				return scripted.Reply{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`}
			}
		}
		return scripted.Text("done after compression")
	}, withConfig(func(c *config.Config) {
		c.Primary = config.Provider{Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: c.Primary.BaseURL, APIMode: "anthropic_messages"}
		c.Reasoning = config.Reasoning{ReasoningSettings: config.ReasoningSettings{BudgetTokens: 2000}}
		c.Compression.ProtectLastN = 2
		c.Compression.ProtectFirstN = 2
	}))
	for i := range 3 {
		require.NoError(t, writeWorkspaceFile(h, fmt.Sprintf("f%d.txt", i), fileContent(i)))
	}
	task := NewTask("read three files")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "result: %+v", res)
	require.Equal(t, "done after compression", res.FinalResponse)
	require.NotEmpty(t, res.ContinuedAs, "the history was compressed")

	reqs := h.Model.Requests()
	last := reqs[len(reqs)-1]
	var body sentBody
	require.NoError(t, json.Unmarshal(last.Raw, &body))
	require.NotNil(t, body.Thinking)
	require.Equal(t, int64(2000), body.Thinking.BudgetTokens)
	var signatures []string
	for _, m := range body.Messages {
		for _, b := range m.Content {
			if b.Type == "thinking" {
				signatures = append(signatures, b.Signature)
			}
		}
	}
	require.Contains(t, signatures, "sig-2", "the continued tool turn keeps its signed block")
}
