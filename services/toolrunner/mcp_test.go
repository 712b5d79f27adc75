package toolrunner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/stretchr/testify/require"
)

func withTestMCPServer(c *Config) {
	c.MCPServers = map[string]config.MCPServer{
		"demo": {Command: os.Args[0], Env: map[string]string{helperEnv: "mcp", "DEMO_SETTING": "given"}},
	}
}

func TestMCPServerToolsAreNamespacedAndCallable(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-fake-for-mcp")
	h := newHarness(t, withTestMCPServer)

	res := h.call("mcp_demo_echo", map[string]any{"text": "hi"})
	require.Equal(t, "ok", res.GetStatus(), res.GetContent())
	require.Equal(t, "echo: hi", res.GetContent())
	require.Equal(t, "5", h.call("mcp_demo_add", map[string]any{"a": 2, "b": 3}).GetContent())

	res = h.call("mcp_demo_fail", map[string]any{})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), "it broke")

	res = h.call("mcp_demo_add", map[string]any{"a": "two", "b": 3})
	require.True(t, res.GetIsError())
	require.Contains(t, res.GetContent(), `"a" must be an integer`)

	env := h.call("mcp_demo_env", map[string]any{}).GetContent()
	require.Contains(t, env, "DEMO_SETTING=given")
	require.NotContains(t, env, "sk-fake-for-mcp")
}

func TestMCPToolSchemasAreServed(t *testing.T) {
	h := newHarness(t, withTestMCPServer)
	msg, err := h.bus.NC.Request(bus.ToolSpecsSubject, nil, 5*time.Second)
	require.NoError(t, err)
	var specs []ToolSpecJSON
	require.NoError(t, json.Unmarshal(msg.Data, &specs))
	byName := map[string]ToolSpecJSON{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	echo, ok := byName["mcp_demo_echo"]
	require.True(t, ok, "tools: %v", byName)
	require.Equal(t, "Echo the text back.", echo.Description)
	require.True(t, echo.ReadOnly)
	props := echo.Parameters["properties"].(map[string]any)
	require.Contains(t, props, "text")
	require.Contains(t, byName, "terminal")
	require.Contains(t, byName, "mcp_demo_add")
}

func TestMCPServerThatCannotStartFailsStart(t *testing.T) {
	h := newHarness(t)
	cfg := h.cfg
	cfg.MCPServers = map[string]config.MCPServer{"broken": {Command: "/nonexistent/mcp-server"}}
	nc, js := h.bus.Connect(t, "broken")
	svc, err := New(cfg, depsFor(nc, js, t))
	require.NoError(t, err)
	err = svc.Start(context.Background())
	require.ErrorContains(t, err, "MCP server broken")
	require.NoError(t, svc.Shutdown(context.Background()))
}

func TestMCPServerStopsWithTheRunner(t *testing.T) {
	// The server has its own PID namespace, so the pid it reports is not
	// the host's: the test finds it on the host by an environment mark.
	mark := fmt.Sprintf("HERALD_TEST_MARK=%d", time.Now().UnixNano())
	h := newHarness(t, withTestMCPServer, func(c *Config) {
		demo := c.MCPServers["demo"]
		demo.Env = map[string]string{helperEnv: "mcp", "HERALD_TEST_MARK": strings.TrimPrefix(mark, "HERALD_TEST_MARK=")}
		c.MCPServers["demo"] = demo
	})
	require.Equal(t, "echo: up", h.call("mcp_demo_echo", map[string]any{"text": "up"}).GetContent())
	pids := hostPIDsWith(mark)
	require.NotEmpty(t, pids, "the server is running on the host")
	require.NoError(t, h.svc.Shutdown(context.Background()))
	require.Eventually(t, func() bool { return len(hostPIDsWith(mark)) == 0 }, 10*time.Second, 20*time.Millisecond)
}

// hostPIDsWith are the live host processes whose environment holds kv.
func hostPIDsWith(kv string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		pid, _ := strconv.Atoi(filepath.Base(d))
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), kv) && processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}
