package gateway

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
)

// randomText mixes what JSON encoding treats specially: quotes, escapes,
// HTML characters (encoding/json escapes <, > and &), control characters,
// U+2028/U+2029, non-ASCII and invalid UTF-8.
func randomText(r *rand.Rand) string {
	pieces := []string{"", "hello", " ", "\"", "\\", "<b>", "&amp;", ">", "\n", "\t", "\x00", "\x1f", "\u2028", "\u2029",
		"é", "日本", "🙂", "\xff", "\xe2\x82", "{\"a\":1}", "</think>", "herald-splice-", strings.Repeat("x", 300)}
	var b strings.Builder
	for n := r.IntN(8); n > 0; n-- {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randomMessage(r *rand.Rand) *heraldpb.ChatMessage {
	m := &heraldpb.ChatMessage{Role: []string{"system", "user", "assistant", "tool", ""}[r.IntN(5)], Content: randomText(r)}
	switch m.Role {
	case "assistant":
		if r.IntN(2) == 0 {
			m.Reasoning = randomText(r)
		}
		if r.IntN(2) == 0 { // the providers' own records, kept to go back unchanged
			text, _ := json.Marshal(randomText(r))
			m.ReasoningItems = []*heraldpb.ReasoningItem{
				{ApiMode: ModeAnthropicMessages, Json: `{"type":"thinking","thinking":` + string(text) + `,"signature":"sig/+="}`},
				{ApiMode: ModeAnthropicMessages, Json: `{"type":"redacted_thinking","data":"red<&>"}`},
				{ApiMode: ModeCodexResponses, Json: `{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":` + string(text) + `}],"encrypted_content":"enc"}`},
			}
		}
		for n := r.IntN(3); n > 0; n-- {
			id := []string{"call_" + fmt.Sprint(r.IntN(1000)), "abcDEF123", "", randomText(r)}[r.IntN(4)]
			args := []string{randomText(r), `{ "path" : "<a&b>.txt" }`, `{"n":1e3,"s":"\u2028é"}`, `[1]`, `null`}[r.IntN(5)]
			name := []string{"read_file", "mcp_server__tool", randomText(r)}[r.IntN(3)]
			m.ToolCalls = append(m.ToolCalls, &heraldpb.ToolCall{Id: id, Name: name, Arguments: args})
		}
	case "tool":
		m.ToolCallId = []string{"call_1", "abcDEF123", randomText(r)}[r.IntN(3)]
		if r.IntN(2) == 0 {
			m.Name = "read_file"
		}
	}
	return m
}

// splicingEncoder is an encoder that splices kept message encodings, with
// the body it builds without them.
type splicingEncoder interface {
	requestEncoder
	whole(call modelCall) (*requestBody, error)
}

// TestSplicedBodiesMatchWhole runs randomized sessions through every
// profile in each API mode that splices: each step's body, spliced from the
// messages kept encoded in the history's wire slots, must be byte for byte
// the body encoded whole.
func TestSplicedBodiesMatchWhole(t *testing.T) {
	names := make([]string, 0, len(builtinProfiles))
	for n := range builtinProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	modes := map[string]func(Profile) splicingEncoder{
		ModeChatCompletions:   func(p Profile) splicingEncoder { return &chatEncoder{profile: p} },
		ModeCodexResponses:    func(p Profile) splicingEncoder { return &responsesEncoder{profile: p} },
		ModeAnthropicMessages: func(p Profile) splicingEncoder { return &anthropicEncoder{profile: p} },
	}
	tools := []*heraldpb.ToolSpec{{Name: "read_file", Description: "Read <a> file & more", ParametersJson: `{"type":"object","properties":{"path":{"type":"string"}}}`},
		{Name: "terminal", ParametersJson: `{"type":"object","properties":{"command":{"type":"string","description":"a \"shell\" line"}}}`}}
	for mode, newEncoder := range modes {
		spliced, kept := 0, 0
		for _, name := range names {
			for seed := uint64(0); seed < 12; seed++ {
				r := rand.New(rand.NewPCG(seed, 14))
				e := newEncoder(builtinProfiles[name])
				model := []string{"gpt-4.1", "anthropic/claude-sonnet-4", "mistral-large", "deepseek-reasoner"}[seed%4]
				var history []*heraldpb.ChatMessage
				var wire []*wireSlot
				for step := 0; step < 8; step++ {
					for n := 1 + r.IntN(3); n > 0; n-- {
						history = append(history, randomMessage(r))
					}
					if r.IntN(6) == 0 {
						wire = newWireSlots(len(history)) // the history was read again from the log
					} else {
						wire = append(wire, newWireSlots(len(history)-len(wire))...)
					}
					msgs := append(append([]*heraldpb.ChatMessage{}, history...), randomMessage(r))
					call := modelCall{model: model, messages: msgs, tools: tools, maxOut: int64(r.IntN(3) * 4096), stream: r.IntN(2) == 0, wire: wire,
						reasoning: reasoningAsk{effort: []string{"", "low", "high"}[r.IntN(3)]}}
					if seed%2 == 0 {
						call.toolsKey = "set-digest" // the request referred to its tools: their encoding is kept too
					}
					want, err := e.whole(call)
					require.NoError(t, err)
					got, err := e.encode(call)
					require.NoError(t, err)
					require.Equal(t, string(want.Bytes()), string(got.Bytes()), "%s, profile %s, seed %d, step %d", mode, name, seed, step)
					spliced++
				}
				for _, s := range wire {
					if _, ok := s.get(e); ok {
						kept++
					}
				}
			}
		}
		require.Greater(t, spliced, 100, mode)
		require.Greater(t, 2*kept, spliced, "%s: too few messages were kept encoded", mode)
		t.Logf("%s: %d bodies compared, %d messages kept encoded at the sessions' ends", mode, spliced, kept)
	}
}

// TestSplicedBodyReusesKeptBytes: a message's kept encoding is what later
// steps send, so the history is not encoded again.
func TestSplicedBodyReusesKeptBytes(t *testing.T) {
	e := &chatEncoder{profile: builtinProfiles["openai"]}
	msgs := []*heraldpb.ChatMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}
	wire := newWireSlots(2)
	call := modelCall{model: "gpt-4.1", messages: msgs, wire: wire}
	first, err := e.encode(call)
	require.NoError(t, err)
	kept, ok := wire[1].get(e)
	require.True(t, ok)
	require.JSONEq(t, `{"content":"hi","role":"user"}`, string(kept))
	wire[1].put(e, []byte(`{"content":"kept","role":"user"}`))
	second, err := e.encode(call)
	require.NoError(t, err)
	require.Equal(t, strings.Replace(string(first.Bytes()), `"hi"`, `"kept"`, 1), string(second.Bytes()))
}

// TestChatMessageJSONIsOpenAIGosEncoding: the direct encoding of a chat
// message is byte for byte openai-go's, for every kind of message and text,
// with each reasoning echo field a profile can name.
func TestChatMessageJSONIsOpenAIGosEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 2))
	direct := 0
	for _, echo := range []string{"", EchoReasoningContent, EchoReasoning, "thoughts", "content", "odd \"key\" <x>"} {
		for range 3000 {
			m := randomMessage(r)
			want, err := json.Marshal(chatMessagesToWire([]*heraldpb.ChatMessage{m}, echo, nil)[0])
			require.NoError(t, err)
			got, ok := chatMessageJSON(m, echo)
			if !ok {
				require.Equal(t, "content", echo, "only an echo field that collides is refused")
				continue
			}
			require.Equal(t, string(want), string(got), "echo %q, message %v", echo, m)
			direct++
		}
	}
	require.Equal(t, 5*3000, direct)
}
