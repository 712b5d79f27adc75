package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

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

// runMCPServer serves one tool, "shout", over stdio.
func runMCPServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-mcp", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Upper-case the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text) + "!"}}}, nil, nil
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
