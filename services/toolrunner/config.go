package toolrunner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/hooks"
	"github.com/heraldrun/herald/proto"
)

// Approval modes (approvals.mode).
const (
	ApprovalsManual = "manual"
	ApprovalsOff    = "off"
	ApprovalsDeny   = "deny"
)

// Config is the tool runner's configuration.
type Config struct {
	// Pool is the pool of sessions this runner serves (herald serve --pool).
	Pool string
	// Concurrency caps the calls this process works on at once, its quick
	// reads (ReadConcurrency) aside.
	Concurrency int
	// ReadConcurrency caps the calls of the tools that only read the
	// workspace (read_file, search_files: toolspec.Quick) this process works
	// on at once, on a consumer of their own beside Concurrency's: they run
	// no program and take milliseconds, so they never wait behind long
	// commands. 0: four times Concurrency.
	ReadConcurrency int
	// WorkspaceRoot holds every session's workspace folder.
	WorkspaceRoot string
	// TerminalMaxChars caps terminal output; longer output keeps head and tail.
	TerminalMaxChars int
	// ReadFileMaxLines caps the lines one read_file returns.
	ReadFileMaxLines int
	// MaxResultChars caps any other tool's result.
	MaxResultChars int
	// TerminalTimeout is the default per-command timeout.
	TerminalTimeout time.Duration
	// MaxTerminalTimeout caps the timeout a model may ask for.
	MaxTerminalTimeout time.Duration
	// ApprovalsMode is manual, off or deny; a call's own mode wins when set.
	ApprovalsMode string
	// ApprovalTimeout is how long an approval or clarify question waits.
	ApprovalTimeout time.Duration
	// BreakerThreshold failures of one tool in a session disable it there.
	BreakerThreshold int
	// Checkpoints snapshots the workspace before file-changing tools.
	Checkpoints bool
	// CheckpointDir keeps the snapshots, outside every workspace.
	CheckpointDir string
	// DataDir is the runner's data folder (NATS store, checkpoints): tools
	// never reach it, even when it lies inside a workspace (herald run).
	DataDir string
	// ToolConcurrency caps how many calls of a tool run at once in this process.
	ToolConcurrency map[string]int
	// AckWait is how long a call may go without a keep-alive before redelivery.
	AckWait time.Duration
	// MaxDeliver is how many deliveries a call gets before it is dead-lettered.
	MaxDeliver int
	// MCPServers are stdio MCP servers whose tools this runner offers.
	MCPServers map[string]config.MCPServer
	// SearchMaxResults caps the matches search_files returns.
	SearchMaxResults int
	// Sandbox confines every command a tool runs (this runner's pool's
	// settings of herald.yaml's sandbox).
	Sandbox config.Sandbox
	// Hooks is how pre_tool_call is asked.
	Hooks hooks.Config
	// Code limits execute_code programs.
	Code CodeLimits
	// Files limits what the file tools write.
	Files FileLimits
}

// FileLimits bound what write_file and patch may write.
type FileLimits struct {
	// MaxWriteBytes is the largest file one call may leave.
	MaxWriteBytes int64
	// MaxWorkspaceBytes caps what a workspace's files may hold after a
	// call that grows them (measured at most every usageTTL; the file
	// tools' own writes are counted as they are made).
	MaxWorkspaceBytes int64
}

// CodeLimits bound one execute_code program.
type CodeLimits struct {
	// Timeout stops the program.
	Timeout time.Duration
	// MaxToolCalls a program may make; the next raises ToolError.
	MaxToolCalls int
	// MaxOutputChars of output in the result, truncation marker included.
	MaxOutputChars int
	// Python is the interpreter: the system's (/usr/bin/python3) unless set.
	Python string
}

// systemPython is the operating system's python3, the one a sandbox that
// shows only /usr still has; without it, python3 from PATH.
func systemPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// DefaultConfig returns the defaults of BEHAVIOURS.md.
func DefaultConfig() Config {
	return Config{
		Pool:               bus.DefaultPool,
		Concurrency:        runtime.NumCPU(),
		WorkspaceRoot:      filepath.Join(".herald", "workspace"),
		TerminalMaxChars:   50000,
		ReadFileMaxLines:   2000,
		MaxResultChars:     100000,
		TerminalTimeout:    180 * time.Second,
		MaxTerminalTimeout: time.Hour,
		ApprovalsMode:      ApprovalsManual,
		ApprovalTimeout:    60 * time.Second,
		BreakerThreshold:   3,
		CheckpointDir:      filepath.Join(".herald", "checkpoints"),
		ToolConcurrency:    map[string]int{},
		AckWait:            10 * time.Second,
		MaxDeliver:         5,
		SearchMaxResults:   200,
		Sandbox:            config.DefaultSandbox(),
		Hooks:              hooks.Config{Timeout: hooks.DefaultTimeout},
		Code:               CodeLimits{Timeout: 300 * time.Second, MaxToolCalls: 50, MaxOutputChars: 50000, Python: systemPython()},
		Files:              FileLimits{MaxWriteBytes: 64 << 20, MaxWorkspaceBytes: 2 << 30},
	}
}

// ConfigFrom derives the runner's configuration from Herald's.
func ConfigFrom(c config.Config) Config {
	cfg := DefaultConfig()
	cfg.WorkspaceRoot = c.WorkspaceRoot()
	cfg.CheckpointDir = filepath.Join(c.DataDir, "checkpoints")
	cfg.DataDir = c.DataDir
	set := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	set(&cfg.TerminalMaxChars, c.ToolOutput.TerminalMaxChars)
	set(&cfg.ReadFileMaxLines, c.ToolOutput.ReadFileMaxLines)
	set(&cfg.MaxResultChars, c.ToolOutput.MaxResultChars)
	if c.ToolOutput.TerminalTimeout > 0 {
		cfg.TerminalTimeout = c.ToolOutput.TerminalTimeout
	}
	if c.Approvals.Mode != "" {
		cfg.ApprovalsMode = c.Approvals.Mode
	}
	if c.Approvals.Timeout > 0 {
		cfg.ApprovalTimeout = c.Approvals.Timeout
	}
	cfg.MCPServers = c.MCPServers
	cfg.Sandbox = c.Sandbox
	cfg.Hooks = hooks.ConfigFrom(c)
	if c.CodeExecution.Timeout > 0 {
		cfg.Code.Timeout = time.Duration(c.CodeExecution.Timeout) * time.Second
	}
	set(&cfg.Code.MaxToolCalls, c.CodeExecution.MaxToolCalls)
	set(&cfg.Code.MaxOutputChars, c.CodeExecution.MaxOutputChars)
	if c.CodeExecution.Python != "" {
		cfg.Code.Python = c.CodeExecution.Python
	}
	if c.Files.MaxWriteBytes > 0 {
		cfg.Files.MaxWriteBytes = c.Files.MaxWriteBytes
	}
	if c.Files.MaxWorkspaceBytes > 0 {
		cfg.Files.MaxWorkspaceBytes = c.Files.MaxWorkspaceBytes
	}
	return cfg
}

// Validate fails fast on settings the runner cannot work with.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	check(c.Pool == "" || proto.IsToken(c.Pool), "toolrunner: pool %q may hold only letters, digits, '-' and '_'", c.Pool)
	check(c.Concurrency >= 0, "toolrunner: concurrency must not be negative")
	check(c.WorkspaceRoot != "", "toolrunner: workspace root is required")
	check(c.TerminalMaxChars > 0 && c.ReadFileMaxLines > 0 && c.MaxResultChars > 0, "toolrunner: tool_output limits must be positive")
	check(c.TerminalTimeout > 0, "toolrunner: terminal timeout must be positive")
	check(c.ApprovalTimeout > 0, "toolrunner: approvals timeout must be positive")
	check(c.BreakerThreshold > 0, "toolrunner: breaker threshold must be positive")
	check(!strings.ContainsAny(c.Code.Python, "'\n"), "toolrunner: code_execution.python must not hold a quote or a newline")
	check(!c.Checkpoints || c.CheckpointDir != "", "toolrunner: checkpoints need a checkpoint dir")
	switch c.ApprovalsMode {
	case ApprovalsManual, ApprovalsOff, ApprovalsDeny:
	default:
		errs = append(errs, fmt.Errorf("toolrunner: approvals mode must be manual, off or deny, got %q", c.ApprovalsMode))
	}
	for tool, n := range c.ToolConcurrency {
		check(n > 0, "toolrunner: concurrency limit of %s must be positive", tool)
	}
	if err := c.Sandbox.ForPool(c.Pool).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("toolrunner: %w", err))
	}
	for name, s := range c.MCPServers {
		check(proto.IsToken(name), "toolrunner: MCP server name %q may hold only letters, digits, '-' and '_'", name)
		check(s.Command != "", "toolrunner: MCP server %s needs a command", name)
	}
	return errors.Join(errs...)
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Pool == "" {
		c.Pool = d.Pool
	}
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	if c.ReadConcurrency <= 0 {
		c.ReadConcurrency = 4 * c.Concurrency
	}
	if c.MaxTerminalTimeout <= 0 {
		c.MaxTerminalTimeout = d.MaxTerminalTimeout
	}
	if c.AckWait <= 0 {
		c.AckWait = d.AckWait
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = d.MaxDeliver
	}
	if c.SearchMaxResults <= 0 {
		c.SearchMaxResults = d.SearchMaxResults
	}
	if c.Code.Timeout <= 0 {
		c.Code.Timeout = d.Code.Timeout
	}
	if c.Code.MaxToolCalls <= 0 {
		c.Code.MaxToolCalls = d.Code.MaxToolCalls
	}
	if c.Code.Python == "" {
		c.Code.Python = systemPython()
	}
	if c.Code.MaxOutputChars <= 0 {
		c.Code.MaxOutputChars = d.Code.MaxOutputChars
	}
	if c.Files.MaxWriteBytes <= 0 {
		c.Files.MaxWriteBytes = d.Files.MaxWriteBytes
	}
	if c.Files.MaxWorkspaceBytes <= 0 {
		c.Files.MaxWorkspaceBytes = d.Files.MaxWorkspaceBytes
	}
}
