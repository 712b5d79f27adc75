package compressor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto/heraldpb"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

const wait = 10 * time.Second

func startService(t testing.TB, b *heraldtest.Bus, cfg Config) *Service {
	t.Helper()
	nc, js := b.Connect(t, "compressor")
	s, err := New(cfg, service.Deps{NC: nc, JS: js, Log: heraldtest.Logger(t)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// noModelConfig writes deterministic summaries (no gateway in these tests).
func noModelConfig() Config {
	cfg := DefaultConfig()
	cfg.LLMSummary = false
	return cfg
}

// request publishes a compression request as the loop does and returns the result.
func request(t testing.TB, b *heraldtest.Bus, req *heraldpb.CompressRequest) *heraldpb.CompressResult {
	t.Helper()
	if req.ReplySubject == "" {
		req.ReplySubject = bus.CompressResult(req.SessionId)
	}
	require.NoError(t, bus.PublishProto(context.Background(), b.JS, bus.CompressRequest(req.SessionId), req.RequestId, req))
	var res heraldpb.CompressResult
	require.Eventually(t, func() bool {
		m, err := bus.LastOnSubject(context.Background(), b.JS, bus.StreamCompressResults, req.ReplySubject)
		return err == nil && proto.Unmarshal(m.Data, &res) == nil && res.RequestId == req.RequestId
	}, wait, 5*time.Millisecond)
	return &res
}

func sys(s string) *heraldpb.ChatMessage  { return &heraldpb.ChatMessage{Role: "system", Content: s} }
func user(s string) *heraldpb.ChatMessage { return &heraldpb.ChatMessage{Role: "user", Content: s} }
func asst(s string) *heraldpb.ChatMessage {
	return &heraldpb.ChatMessage{Role: "assistant", Content: s}
}

func calls(id, name string, args any) *heraldpb.ChatMessage {
	data, _ := json.Marshal(args)
	return &heraldpb.ChatMessage{Role: "assistant", ToolCalls: []*heraldpb.ToolCall{{Id: id, Name: name, Arguments: string(data)}}}
}

func result(id, name, content string) *heraldpb.ChatMessage {
	return &heraldpb.ChatMessage{Role: "tool", ToolCallId: id, Name: name, Content: content}
}

func terminalOutput(lines, code int) string {
	data, _ := json.Marshal(map[string]any{"output": strings.Repeat("ok line of output\n", lines), "exit_code": code})
	return string(data)
}

// agentHistory is a session of steps tool steps, each with an output of
// outputChars characters, closed by a final answer.
func agentHistory(goal string, steps, outputChars int) []*heraldpb.ChatMessage {
	msgs := []*heraldpb.ChatMessage{sys("You are Herald."), user(goal)}
	for i := range steps {
		id := fmt.Sprintf("call_%d", i)
		switch i % 3 {
		case 0:
			msgs = append(msgs, calls(id, "terminal", map[string]any{"command": fmt.Sprintf("go test ./pkg%d", i)}),
				result(id, "terminal", terminalOutput(outputChars/18, i%2)))
		case 1:
			msgs = append(msgs, calls(id, "read_file", map[string]any{"path": fmt.Sprintf("pkg/file%d.go", i)}),
				result(id, "read_file", strings.Repeat("x", outputChars)))
		default:
			msgs = append(msgs, calls(id, "write_file", map[string]any{"path": fmt.Sprintf("pkg/out%d.go", i), "content": "a\nb\nc\n"}),
				result(id, "write_file", fmt.Sprintf("wrote 6 bytes (3 lines) to pkg/out%d.go %s", i, strings.Repeat(" ", outputChars))))
		}
	}
	return append(msgs, asst("All tests pass now."))
}

// requireWellFormed checks the message rules every provider enforces: after
// the system prompt, users and assistants alternate, and every tool message
// answers a call of the assistant message right before its group.
func requireWellFormed(t testing.TB, msgs []*heraldpb.ChatMessage) {
	t.Helper()
	prev := ""
	pending := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case "system":
			require.True(t, prev == "" || prev == "system", "system message %d after the start", i)
		case "tool":
			require.True(t, pending[m.ToolCallId], "tool message %d (%s) orphaned from its call", i, m.ToolCallId)
			delete(pending, m.ToolCallId)
		default:
			require.Empty(t, pending, "message %d cuts off the results of calls %v", i, pending)
			require.NotEqual(t, prev, m.Role, "two %s messages touch at %d", m.Role, i)
			if m.Role == "assistant" {
				for _, c := range m.ToolCalls {
					pending[c.Id] = true
				}
			}
		}
		if m.Role != "tool" {
			prev = m.Role
		} else {
			prev = "tool"
		}
	}
	require.Empty(t, pending, "calls without results at the end")
}

func contents(msgs []*heraldpb.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		// Short digests keep a failure's diff readable.
		sum := sha256.Sum256([]byte(m.Content + fmt.Sprint(m.ToolCalls)))
		out = append(out, fmt.Sprintf("%s:%.60q…(%d chars, %x)", m.Role, m.Content, len(m.Content), sum[:6]))
	}
	return out
}

func summaries(msgs []*heraldpb.ChatMessage) []*heraldpb.ChatMessage {
	var out []*heraldpb.ChatMessage
	for _, m := range msgs {
		if strings.HasPrefix(m.Content, SummaryPrefix) {
			out = append(out, m)
		}
	}
	return out
}
