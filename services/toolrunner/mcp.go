package toolrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/toolspec"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPPrefix starts the name of every MCP tool: mcp_<server>_<tool>.
const MCPPrefix = "mcp_"

// mcpHub holds the sessions with the configured MCP servers and the tools
// they offer, under namespaced names. It is filled once at Start and only
// read afterwards.
type mcpHub struct {
	sessions map[string]*mcp.ClientSession
	tools    map[string]mcpTool
	// releases free each server's sandbox once it has stopped.
	releases map[string]func()
}

type mcpTool struct {
	session *mcp.ClientSession
	remote  string
	spec    toolspec.Spec
	timeout time.Duration
}

// startMCP starts every configured server and lists its tools; a server
// that cannot start fails Start, so a broken configuration is seen at once.
func (s *Service) startMCP(ctx context.Context) error {
	hub := &mcpHub{sessions: map[string]*mcp.ClientSession{}, tools: map[string]mcpTool{}, releases: map[string]func(){}}
	s.mcp = hub
	names := make([]string, 0, len(s.cfg.MCPServers))
	for name := range s.cfg.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if srv := s.cfg.MCPServers[name]; srv.Sandbox.None && s.sandbox.Confined() {
			s.log.Warn().Str("mcp_server", name).Msg("mcp_servers." + name + ".sandbox is none: this server runs with the tool runner's own view of the machine (files, network, processes)")
		}
		if err := hub.connect(ctx, name, s.cfg.MCPServers[name], s.sandbox, s.cfg.WorkspaceRoot, s.secrets.scrubbedEnv(), s.cfg.TerminalTimeout); err != nil {
			s.stopMCP()
			return fmt.Errorf("toolrunner: MCP server %s: %w", name, err)
		}
	}
	return nil
}

func (h *mcpHub) connect(ctx context.Context, name string, srv config.MCPServer, sb *Sandbox, dir string, env []string, timeout time.Duration) error {
	// The server gets the scrubbed environment plus what its entry names:
	// a key it needs is given to it alone, never to every tool.
	env = slices.Clone(env)
	for k, v := range srv.Env {
		env = append(env, k+"="+v)
	}
	cmd, release, err := sb.ServerCommand(srv, dir, env)
	if err != nil {
		return fmt.Errorf("start %s: %w", srv.Command, err)
	}
	h.releases[name] = release
	stderr := &tailBuffer{max: 2048}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "herald-toolrunner", Version: "v1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	session, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return fmt.Errorf("start %s: %w%s", srv.Command, err, startHint(srv, sb, stderr.String()))
	}
	h.sessions[name] = session
	for t, err := range session.Tools(cctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		spec := mcpSpec(name, t)
		h.tools[spec.Name] = mcpTool{session: session, remote: t.Name, spec: spec, timeout: timeout}
	}
	return nil
}

var notInName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// mcpSpec turns an MCP tool into a Herald tool spec under its namespaced name.
func mcpSpec(server string, t *mcp.Tool) toolspec.Spec {
	name := notInName.ReplaceAllString(MCPPrefix+server+"_"+t.Name, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	params, _ := t.InputSchema.(map[string]any)
	if params == nil {
		params = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	spec := toolspec.Spec{Name: name, Description: t.Description, Parameters: params, Service: "toolrunner"}
	if a := t.Annotations; a != nil {
		spec.ReadOnly = a.ReadOnlyHint
		spec.Idempotent = a.ReadOnlyHint || a.IdempotentHint
	}
	return spec
}

func (s *Service) stopMCP() {
	if s.mcp == nil {
		return
	}
	for name, session := range s.mcp.sessions {
		if err := session.Close(); err != nil {
			s.log.Debug().Err(err).Str("mcp_server", name).Msg("MCP server stopped with an error")
		}
	}
	for _, release := range s.mcp.releases {
		release()
	}
	s.mcp.sessions, s.mcp.releases = map[string]*mcp.ClientSession{}, map[string]func(){}
}

func (h *mcpHub) lookup(name string) (tool, toolspec.Spec, bool) {
	if h == nil {
		return nil, toolspec.Spec{}, false
	}
	t, ok := h.tools[name]
	if !ok {
		return nil, toolspec.Spec{}, false
	}
	return t.call, t.spec, true
}

func (h *mcpHub) specs() []toolspec.Spec {
	if h == nil {
		return nil
	}
	out := make([]toolspec.Spec, 0, len(h.tools))
	for _, t := range h.tools {
		out = append(out, t.spec)
	}
	return out
}

// call forwards a call to the tool's server.
func (t mcpTool) call(ctx context.Context, c *call) outcome {
	if err := decodeArgs(t.spec.Name, t.spec.Parameters, c.req.GetArguments(), nil); err != nil {
		return failed(err)
	}
	var args map[string]any
	if strings.TrimSpace(c.req.GetArguments()) != "" {
		_ = json.Unmarshal([]byte(c.req.GetArguments()), &args)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.session.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: args})
	if ctx.Err() == context.DeadlineExceeded {
		return outcome{status: statusTimeout, content: fmt.Sprintf("MCP tool %s did not answer within %s", t.remote, t.timeout)}
	}
	if err != nil {
		return failed(fmt.Errorf("MCP tool %s: %w", t.remote, err))
	}
	text := mcpText(res)
	if res.IsError {
		return outcome{status: statusError, content: text}
	}
	return ok(text)
}

// mcpText renders a result's content for the model: text as is, other
// content as a short note of what it was.
func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch v := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, v.Text)
		default:
			data, _ := json.Marshal(c)
			parts = append(parts, string(data))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(data))
	}
	return strings.Join(parts, "\n")
}
