package toolrunner

import (
	"context"
	"fmt"
	"sort"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProbeMCP starts the MCP server name of c as a tool runner would (same
// environment, same folder), lists the tools the model would be offered and
// stops it (herald doctor).
func ProbeMCP(ctx context.Context, c config.Config, name string) ([]string, error) {
	cfg := ConfigFrom(c)
	srv, ok := cfg.MCPServers[name]
	if !ok {
		return nil, fmt.Errorf("no MCP server %q in the configuration", name)
	}
	hub := &mcpHub{sessions: map[string]*mcp.ClientSession{}, tools: map[string]mcpTool{}}
	defer func() {
		for _, s := range hub.sessions {
			_ = s.Close()
		}
	}()
	if err := hub.connect(ctx, name, srv, cfg.WorkspaceRoot, secretsOf(c).scrubbedEnv(), cfg.TerminalTimeout); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(hub.tools))
	for n := range hub.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
