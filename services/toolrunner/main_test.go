package toolrunner

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The test binary doubles as the real processes the tests need: a small MCP
// server (helperEnv=mcp) and a tool runner process (helperEnv=runner) that
// tests kill with SIGKILL.
const helperEnv = "TOOLRUNNER_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "mcp":
		runTestMCPServer()
		os.Exit(0)
	case "runner":
		if err := runRunnerProcess(); err != nil {
			fmt.Fprintln(os.Stderr, "runner:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type addIn struct {
	A int `json:"a" jsonschema:"first number"`
	B int `json:"b" jsonschema:"second number"`
}

type none struct{}

func runTestMCPServer() {
	s := mcp.NewServer(&mcp.Implementation{Name: "herald-test-mcp", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(in.A + in.B)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The server's environment."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it broke"}}}, nil, nil
		})
	addProbeTools(s)
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

type pathIn struct {
	Path string `json:"path" jsonschema:"a file"`
}

type writeIn struct {
	Path string `json:"path" jsonschema:"a file"`
	Text string `json:"text" jsonschema:"what to write"`
}

type addrIn struct {
	Addr string `json:"addr" jsonschema:"host:port"`
}

// addProbeTools are what a hostile MCP server would try: read and write
// any file, connect anywhere, look at the host's processes.
func addProbeTools(s *mcp.Server) {
	text := func(format string, a ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Read a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathIn) (*mcp.CallToolResult, any, error) {
			data, err := os.ReadFile(in.Path)
			if err != nil {
				return text("refused: %v", err), nil, nil
			}
			return text("read: %s", data), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "Write a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
			if err := os.WriteFile(in.Path, []byte(in.Text), 0o644); err != nil {
				return text("refused: %v", err), nil, nil
			}
			return text("written"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "dial", Description: "Connect to an address."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addrIn) (*mcp.CallToolResult, any, error) {
			c, err := net.DialTimeout("tcp", in.Addr, 2*time.Second)
			if err != nil {
				return text("refused: %v", err), nil, nil
			}
			_ = c.Close()
			return text("connected"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "procs", Description: "The command lines of every process in sight."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			dirs, _ := filepath.Glob("/proc/[0-9]*")
			var lines []string
			for _, d := range dirs {
				cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
				lines = append(lines, filepath.Base(d)+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
			}
			return text("%s", strings.Join(lines, "\n")), nil, nil
		})
}

// runRunnerProcess is `herald serve toolrunner` in miniature: a runner on its
// own connection, until SIGTERM (or SIGKILL) ends it.
func runRunnerProcess() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nc, err := nats.Connect(os.Getenv("TOOLRUNNER_TEST_NATS"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = os.Getenv("TOOLRUNNER_TEST_WORKSPACE")
	cfg.Concurrency, _ = strconv.Atoi(os.Getenv("TOOLRUNNER_TEST_CONCURRENCY"))
	if ms, _ := strconv.Atoi(os.Getenv("TOOLRUNNER_TEST_ACKWAIT_MS")); ms > 0 {
		cfg.AckWait = time.Duration(ms) * time.Millisecond
	}
	svc, err := New(cfg, service.Deps{NC: nc, JS: js, Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel),
		Config: config.Default(), Instance: os.Getenv("TOOLRUNNER_TEST_NAME")})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return svc.Shutdown(sctx)
}
