package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// The three API modes a session can speak; every parity case about what
// goes back to the provider runs in each.
var apiModes = []string{"chat_completions", "codex_responses", "anthropic_messages"}

func withAPIMode(mode string) Option {
	return withConfig(func(c *config.Config) { c.Primary.APIMode = mode })
}

// brokenCall is a reply whose one tool call carries args exactly as given,
// valid JSON or not, with finish reason "tool_calls" (stop_reason tool_use).
// Chat Completions and Responses carry arguments as a string, so the
// scripted server sends them as they are. Anthropic streams a tool's input
// as input_json_delta fragments that only form JSON once complete
// (docs.anthropic.com, "Streaming messages": partial_json); a stream cut
// short leaves a fragment, which this raw stream reproduces.
func brokenCall(mode, id, name, args string) scripted.Reply {
	if mode != "anthropic_messages" {
		return scripted.Reply{ToolCalls: []scripted.Call{{ID: id, Name: name, Args: args}}}
	}
	var b strings.Builder
	event := func(typ string, v map[string]any) {
		v["type"] = typ
		data, _ := json.Marshal(v)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data)
	}
	event("message_start", map[string]any{"message": map[string]any{"id": "msg_cut", "type": "message", "role": "assistant",
		"model": "test-model", "content": []any{}, "stop_reason": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1}}})
	event("content_block_start", map[string]any{"index": 0,
		"content_block": map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}})
	event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": args}})
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 20}})
	event("message_stop", map[string]any{})
	return scripted.Reply{Raw: b.String()}
}

// wireCall is one tool call as it appeared in a request body.
type wireCall struct {
	Name string
	Args json.RawMessage // the JSON text of the arguments (Anthropic: the input object)
	Text string          // Chat Completions and Responses: the arguments string itself
}

// wireCalls reads every assistant tool call out of a request body, in the
// body's own shape for its API mode, so nothing the scripted server's
// parser does can hide what was sent.
func wireCalls(t *testing.T, r *scripted.Request) []wireCall {
	t.Helper()
	var out []wireCall
	switch {
	case strings.HasSuffix(r.Path, "/chat/completions"):
		var body struct {
			Messages []struct {
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(r.Raw, &body))
		for _, m := range body.Messages {
			for _, c := range m.ToolCalls {
				out = append(out, wireCall{Name: c.Function.Name, Text: c.Function.Arguments})
			}
		}
	case strings.HasSuffix(r.Path, "/responses"):
		var body struct {
			Input []struct {
				Type      string `json:"type"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"input"`
		}
		require.NoError(t, json.Unmarshal(r.Raw, &body))
		for _, it := range body.Input {
			if it.Type == "function_call" {
				out = append(out, wireCall{Name: it.Name, Text: it.Arguments})
			}
		}
	case strings.HasSuffix(r.Path, "/messages"):
		var body struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(r.Raw, &body))
		for _, m := range body.Messages {
			var blocks []struct {
				Type  string          `json:"type"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			}
			if json.Unmarshal(m.Content, &blocks) != nil {
				continue // plain string content
			}
			for _, bl := range blocks {
				if bl.Type == "tool_use" {
					out = append(out, wireCall{Name: bl.Name, Args: bl.Input})
				}
			}
		}
	default:
		t.Fatalf("request to unexpected path %s", r.Path)
	}
	for i := range out {
		if out[i].Args == nil {
			out[i].Args = json.RawMessage(out[i].Text)
		}
	}
	return out
}

// requireObjectArgs checks that every call in the body carries a JSON
// object as its arguments, and returns the calls.
func requireObjectArgs(t *testing.T, r *scripted.Request) []wireCall {
	t.Helper()
	calls := wireCalls(t, r)
	for _, c := range calls {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(c.Args, &obj), "call %s went out with arguments %q", c.Name, string(c.Args))
		require.NotNil(t, obj, "call %s went out with arguments %q", c.Name, string(c.Args))
	}
	return calls
}

// Issue 13, half-written files: arguments ending inside a string are cut
// off; the write never runs whatever the finish reason says (some routers
// report tool_calls for a response cut by the length limit), the model is
// told, and no copy sent back carries the broken text.
func TestParityCutOffArgumentsNeverRunWhateverTheFinishReason(t *testing.T) {
	for _, mode := range apiModes {
		t.Run(mode, func(t *testing.T) {
			h := Start(t, scripted.Conversation(
				brokenCall(mode, "call_cut", "write_file", `{"path": "c.txt", "content": "hel`),
				scripted.Text("I will write it in smaller parts."),
			), withAPIMode(mode))
			task := NewTask("write c.txt")
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			_, err := readWorkspaceFile(h, "c.txt")
			require.Error(t, err, "the half-written file was never written")

			results := toolContents(h.Transcript(task.SessionID))
			require.Len(t, results, 1)
			require.Contains(t, results[0], "cut off")
			require.Contains(t, results[0], "inside a string")
			require.Contains(t, results[0], "Nothing was done")

			reqs := convo(h, task.Prompt)
			require.Len(t, reqs, 2)
			calls := requireObjectArgs(t, reqs[1])
			require.Len(t, calls, 1)
			require.Equal(t, "write_file", calls[0].Name)
			require.JSONEq(t, `{}`, string(calls[0].Args), "the broken text is not sent back")
			require.Contains(t, reqs[1].LastMessage().Text(), "cut off", "the model reads why")
		})
	}
}

// Cut off at other places than inside a string: after a key, after a
// comma, inside a literal, on an opening brace. None of them runs.
func TestParityArgumentsCutOffElsewhereNeverRun(t *testing.T) {
	for _, args := range []string{
		`{"path": "c.txt", "content"`,
		`{"path": "c.txt", "content": `,
		`{"path": "c.txt",`,
		`{`,
	} {
		t.Run(args, func(t *testing.T) {
			h := Start(t, scripted.Conversation(
				scripted.Tool("write_file", args),
				scripted.Text("retrying later"),
			))
			task := NewTask("write c.txt, cut at " + args)
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			_, err := readWorkspaceFile(h, "c.txt")
			require.Error(t, err)
			results := toolContents(h.Transcript(task.SessionID))
			require.Len(t, results, 1)
			require.Contains(t, results[0], "cut off")
			requireObjectArgs(t, lastRequest(t, h, task.Prompt))
		})
	}
}

// A call whose arguments only miss their closing brace is the model's slip,
// not a cut: it is repaired and runs, and the repaired object goes back.
func TestParityMissingClosingBraceIsRepairedAndRuns(t *testing.T) {
	for _, mode := range apiModes {
		t.Run(mode, func(t *testing.T) {
			h := Start(t, scripted.Conversation(
				brokenCall(mode, "call_brace", "write_file", `{"path": "c.txt", "content": "hello",`+"\n}"+`}`),
				scripted.Text("written"),
			), withAPIMode(mode))
			task := NewTask("write c.txt with a stray brace")
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			got, err := readWorkspaceFile(h, "c.txt")
			require.NoError(t, err)
			require.Equal(t, "hello", got)
			calls := requireObjectArgs(t, lastRequest(t, h, task.Prompt))
			require.Len(t, calls, 1)
			require.JSONEq(t, `{"path":"c.txt","content":"hello"}`, string(calls[0].Args))
		})
	}
}

// Issue 13, repaired names: WriteFileTool runs as write_file, and the
// history (transcript and every later request) shows write_file, a tool
// that is offered, not the model's spelling.
func TestParityRepairedToolNameReplacesTheModelsSpellingInTheHistory(t *testing.T) {
	for _, mode := range apiModes {
		t.Run(mode, func(t *testing.T) {
			h := Start(t, scripted.Conversation(
				scripted.Tool("WriteFileTool", `{"path":"n.txt","content":"hi"}`),
				scripted.Tool("read_file", `{"path":"n.txt"}`),
				scripted.Text("done"),
			), withAPIMode(mode))
			task := NewTask("write n.txt via a misspelt tool")
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			got, err := readWorkspaceFile(h, "n.txt")
			require.NoError(t, err)
			require.Equal(t, "hi", got)

			msgs := h.Transcript(task.SessionID)
			require.Equal(t, "write_file", msgs[2].ToolCalls[0].Name, "the transcript keeps the repaired name")
			require.Equal(t, "write_file", msgs[3].Name)
			for _, r := range convo(h, task.Prompt)[1:] {
				calls := requireObjectArgs(t, r)
				require.Equal(t, "write_file", calls[0].Name, "request to %s", r.Path)
			}
		})
	}
}

// Issue 13, unparseable arguments: whatever the model wrote, every copy
// sent back carries a JSON object (the repaired one, or {} with the error
// in the tool result), in every API mode.
func TestParityUnparseableArgumentsGoBackAsAnObject(t *testing.T) {
	cases := []struct {
		name, args, wantWire, resultHas string
	}{
		{"garbage", `path=notes.txt`, `{}`, "not valid JSON"},
		{"array", `["notes.txt"]`, `{}`, "must be a JSON object"},
		{"trailing comma", `{"path": "notes.txt",}`, `{"path":"notes.txt"}`, "green tea"},
		{"literal control character in a string", "{\"path\": \"notes\ttxt\"}", `{}`, "not valid JSON"},
	}
	for _, mode := range apiModes {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				h := Start(t, scripted.Conversation(
					brokenCall(mode, "call_bad", "read_file", tc.args),
					scripted.Text("ok"),
				), withAPIMode(mode))
				require.NoError(t, writeWorkspaceFile(h, "notes.txt", "green tea"))
				task := NewTask("read notes, args " + tc.name)
				res := h.Run(task)
				require.Equal(t, proto.ExitTextResponse, res.ExitReason)
				results := toolContents(h.Transcript(task.SessionID))
				require.Len(t, results, 1)
				require.Contains(t, results[0], tc.resultHas)
				calls := requireObjectArgs(t, lastRequest(t, h, task.Prompt))
				require.Len(t, calls, 1)
				require.JSONEq(t, tc.wantWire, string(calls[0].Args))
				msgs := h.Transcript(task.SessionID)
				require.JSONEq(t, tc.wantWire, msgs[2].ToolCalls[0].Arguments, "the history holds what was sent")
			})
		}
	}
}

// A polluted name that matches no tool goes back in the shape providers
// accept for a function name; the tool result still quotes what the model
// wrote. (OpenAI refuses a history holding another name with 400 "string
// does not match pattern", the message in Hermes' classifier examples.)
func TestParityUnknownPollutedNameGoesBackInAProviderShape(t *testing.T) {
	polluted := `no_such_tool" parameter="x" string="true`
	for _, mode := range apiModes {
		t.Run(mode, func(t *testing.T) {
			h := Start(t, scripted.Conversation(scripted.Tool(polluted, `{"x":1}`), scripted.Text("ok")), withAPIMode(mode))
			task := NewTask("call a polluted unknown tool")
			res := h.Run(task)
			require.Equal(t, proto.ExitTextResponse, res.ExitReason)
			calls := requireObjectArgs(t, lastRequest(t, h, task.Prompt))
			require.Len(t, calls, 1)
			require.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, calls[0].Name)
			results := toolContents(h.Transcript(task.SessionID))
			require.Contains(t, results[0], `no tool named "no_such_tool\" parameter=\"x\" string=\"true"`)
		})
	}
}
