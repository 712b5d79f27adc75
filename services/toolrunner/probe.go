package toolrunner

import (
	"context"
	"fmt"
	"sort"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// ProbeMCP starts the MCP server name of c as a tool runner would (same
// environment, same folder, same sandbox), lists the tools the model would be offered and
// stops it (herald doctor).
func ProbeMCP(ctx context.Context, c config.Config, name string) ([]string, error) {
	cfg := ConfigFrom(c)
	srv, ok := cfg.MCPServers[name]
	if !ok {
		return nil, fmt.Errorf("no MCP server %q in the configuration", name)
	}
	sb, err := NewSandbox(cfg.Sandbox.ForPool(cfg.Pool), zerolog.Nop())
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	sb.workspaceRoot, sb.dataDir = cfg.WorkspaceRoot, cfg.DataDir
	hub := &mcpHub{sessions: map[string]*mcp.ClientSession{}, tools: map[string]mcpTool{}, releases: map[string]func(){}}
	defer func() {
		for _, s := range hub.sessions {
			_ = s.Close()
		}
		for _, release := range hub.releases {
			release()
		}
	}()
	if err := hub.connect(ctx, name, srv, sb, cfg.WorkspaceRoot, secretsOf(c).scrubbedEnv(), cfg.TerminalTimeout); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(hub.tools))
	for n := range hub.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
