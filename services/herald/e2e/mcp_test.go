package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/heraldrun/herald/proto"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

const mcpHelperEnv = "HERALD_E2E_MCP_SERVER"

type shoutIn struct {
	Text string `json:"text" jsonschema:"the text to shout"`
}

type peekIn struct {
	Path string `json:"path" jsonschema:"the file to read"`
}

// runMCPServer serves two tools over stdio: "shout", and "peek", which
// reads any file it is asked for (as a hostile server would).
func runMCPServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-mcp", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Upper-case the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text) + "!"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "peek", Description: "Read a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in peekIn) (*mcp.CallToolResult, any, error) {
			data, err := os.ReadFile(in.Path)
			text := "peeked: " + string(data)
			if err != nil {
				text = "refused: " + err.Error()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// A tool of an MCP server configured for the tool runner is offered to the
// model by the loop, with its schema, and runs when the model calls it.
func TestMCPServerToolsReachTheModel(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	h := Start(t, scripted.Conversation(
		scripted.Tool("mcp_loud_shout", `{"text":"hello"}`),
		scripted.Text("it shouted"),
	), WithConfig(func(c *config.Config) {
		c.MCPServers = map[string]config.MCPServer{"loud": {Command: self, Env: map[string]string{mcpHelperEnv: "1"}}}
	}))
	task := NewTask("shout hello")
	res := h.Run(task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)

	reqs := h.RequestsOf(task.Prompt)
	require.NotEmpty(t, reqs)
	offered := false
	for _, raw := range reqs[0].Tools {
		offered = offered || strings.Contains(string(raw), `"mcp_loud_shout"`) && strings.Contains(string(raw), "the text to shout")
	}
	require.True(t, offered, "the MCP tool and its schema are in the first request's tools")
	var result string
	for _, m := range h.Transcript(task.SessionID) {
		if m.Role == "tool" {
			result = m.Content
		}
	}
	require.Contains(t, result, "HELLO!")
}

// An MCP server runs in the tool runner's sandbox: asked by the model to
// read a file of the host, it cannot; the same server with `sandbox: none`
// (an explicit opt-out) can.
func TestMCPServerRunsInTheSandbox(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	planted := filepath.Join("/var/tmp", fmt.Sprintf("herald-e2e-mcp-%d", time.Now().UnixNano()))
	require.NoError(t, os.WriteFile(planted, []byte("host secret"), 0o644))
	t.Cleanup(func() { _ = os.Remove(planted) })
	peek := scripted.Tool("mcp_loud_peek", fmt.Sprintf(`{"path":%q}`, planted))
	for _, tc := range []struct {
		sandbox config.MCPSandbox
		want    string
	}{
		{config.MCPSandbox{}, "refused: open " + planted + ": no such file or directory"},
		{config.MCPSandbox{None: true}, "peeked: host secret"},
	} {
		h := Start(t, scripted.Conversation(peek, scripted.Text("looked")), WithConfig(func(c *config.Config) {
			c.MCPServers = map[string]config.MCPServer{"loud": {Command: self, Env: map[string]string{mcpHelperEnv: "1"}, Sandbox: tc.sandbox}}
		}))
		task := NewTask("peek at the host")
		res := h.Run(task)
		require.Equal(t, proto.ExitTextResponse, res.ExitReason, res.Error)
		var result string
		for _, m := range h.Transcript(task.SessionID) {
			if m.Role == "tool" {
				result = m.Content
			}
		}
		require.Contains(t, result, tc.want, "sandbox %+v", tc.sandbox)
	}
}
