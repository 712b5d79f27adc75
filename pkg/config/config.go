// Package config loads Herald's configuration: flags > environment >
// herald.yaml > defaults. Secrets (API keys) are read from the environment
// only and are never serialised: Config's String and YAML forms omit them.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/pricing"
	"github.com/heraldrun/herald/proto"
	"gopkg.in/yaml.v3"
)

// Provider is one model endpoint: the primary or an entry of fallback_providers.
type Provider struct {
	Provider  string `yaml:"provider"`
	Model     string `yaml:"model"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	APIMode   string `yaml:"api_mode"`
	// APIKey is resolved from the environment at load time; never written out.
	APIKey string `yaml:"-"`
}

// Price is USD per million tokens by class, plus per-request and named
// fees and prompt-size tiers (the one price model: pkg/pricing).
type Price = pricing.Price

type Agent struct {
	MaxTurns      int `yaml:"max_turns"`
	APIMaxRetries int `yaml:"api_max_retries"`
	// RepeatThreshold ends a turn after this many identical rounds (beyond Hermes).
	RepeatThreshold int `yaml:"repeat_threshold"`
}

type Compression struct {
	Enabled       bool    `yaml:"enabled"`
	Threshold     float64 `yaml:"threshold"`
	ProtectFirstN int     `yaml:"protect_first_n"`
	ProtectLastN  int     `yaml:"protect_last_n"`
	TargetRatio   float64 `yaml:"target_ratio"`
}

type Delegation struct {
	MaxIterations         int `yaml:"max_iterations"`
	MaxConcurrentChildren int `yaml:"max_concurrent_children"`
}

// Tools configures how tool calls are dispatched.
type Tools struct {
	// PoolWarningAfter is how long a tool call may wait with no tool runner
	// of its pool taking calls before its session is warned (0: 10s).
	PoolWarningAfter time.Duration `yaml:"pool_warning_after"`
}

type Approvals struct {
	// Mode is manual (ask), off (never ask: dangerous commands run) or deny.
	Mode    string        `yaml:"mode"`
	Timeout time.Duration `yaml:"timeout"`
}

type ToolOutput struct {
	TerminalMaxChars int           `yaml:"terminal_max_chars"`
	ReadFileMaxLines int           `yaml:"read_file_max_lines"`
	MaxResultChars   int           `yaml:"max_result_chars"`
	TerminalTimeout  time.Duration `yaml:"terminal_timeout"`
}

// Retry configures the gateway's backoff (tests use milliseconds).
type Retry struct {
	BaseDelay     time.Duration `yaml:"base_delay"`
	MaxDelay      time.Duration `yaml:"max_delay"`
	RateBaseDelay time.Duration `yaml:"rate_limit_base_delay"`
	RateMaxDelay  time.Duration `yaml:"rate_limit_max_delay"`
	CallTimeout   time.Duration `yaml:"call_timeout"`
}

// MCPServer is a stdio MCP server whose tools the tool runner offers.
type MCPServer struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// Sandbox is how this server differs from the sandbox settings:
	// `sandbox: none` (unconfined) or `sandbox: {network: true}`.
	Sandbox MCPSandbox `yaml:"sandbox"`
}

// Hooks configures plugin hooks (herald.hooks.* subjects).
type Hooks struct {
	// TimeoutMS bounds each request/reply hook (default 250).
	TimeoutMS int `yaml:"timeout_ms"`
	// PreToolCall is "optional" (no answer allows a call) or "required"
	// (no answer refuses it).
	PreToolCall string `yaml:"pre_tool_call"`
}

// HookRequired is the hooks.pre_tool_call setting that refuses unanswered calls.
const HookRequired = "required"

// CodeExecution limits execute_code programs (Hermes' code_execution keys).
type CodeExecution struct {
	// Timeout in seconds before the program is stopped (default 300).
	Timeout int `yaml:"timeout"`
	// MaxToolCalls a program may make (default 50).
	MaxToolCalls int `yaml:"max_tool_calls"`
	// MaxOutputChars of output kept in the result, marker included (default 50,000).
	MaxOutputChars int `yaml:"max_output_chars"`
	// Python is the interpreter (default: the system's, /usr/bin/python3).
	Python string `yaml:"python"`
}

// Files limits what the tool runner's file tools (write_file, patch) write.
type Files struct {
	// MaxWriteBytes is the largest file one call may leave (default 64 MiB).
	MaxWriteBytes int64 `yaml:"max_write_bytes"`
	// MaxWorkspaceBytes caps what a workspace's files may hold after a
	// call that grows them (default 2 GiB).
	MaxWorkspaceBytes int64 `yaml:"max_workspace_bytes"`
}

// Config is everything a Herald process can be told.
type Config struct {
	NATSURL string `yaml:"nats_url"`
	// NATSInboxPrefix is where this process's replies arrive ("": _INBOX_<user>
	// when the NATS URL names a user, so one user cannot read another's
	// replies; _INBOX otherwise).
	NATSInboxPrefix string `yaml:"nats_inbox_prefix"`
	// NATSDeclare is what a process does with streams at start-up: "auto"
	// declares what is missing or out of date; "check" only waits until
	// `herald declare` has (for NATS users not allowed to change streams).
	NATSDeclare   string `yaml:"nats_declare"`
	ClickHouseDSN string `yaml:"clickhouse_dsn"`
	DataDir       string `yaml:"data_dir"`
	Workspace     string `yaml:"workspace"`

	Primary           Provider   `yaml:"-"`
	FallbackProviders []Provider `yaml:"fallback_providers"`

	Agent          Agent                `yaml:"agent"`
	Compression    Compression          `yaml:"compression"`
	Delegation     Delegation           `yaml:"delegation"`
	Approvals      Approvals            `yaml:"approvals"`
	Tools          Tools                `yaml:"tools"`
	Pricing        map[string]Price     `yaml:"pricing"`
	Budgets        Budgets              `yaml:"budgets"`
	ContextWindows map[string]int       `yaml:"context_windows"`
	ToolOutput     ToolOutput           `yaml:"tool_output"`
	Retry          Retry                `yaml:"retry"`
	MCPServers     map[string]MCPServer `yaml:"mcp_servers"`
	Sandbox        Sandbox              `yaml:"sandbox"`
	Tenant         string               `yaml:"tenant"`
	// DashboardToken protects the dashboard when it listens beyond loopback.
	DashboardToken string `yaml:"dashboard_token"`
	// Dashboard is who the dashboard and /metrics answer (see Dashboard).
	Dashboard Dashboard `yaml:"dashboard"`
	// Replicas of every stream (3 on a cluster).
	Replicas int `yaml:"replicas"`
	// hooks: plugin hooks.
	Hooks         Hooks         `yaml:"hooks"`
	CodeExecution CodeExecution `yaml:"code_execution"`
	Files         Files         `yaml:"files"`

	// Providers overrides the gateway's provider profiles, by provider name.
	Providers map[string]ProviderProfile `yaml:"providers"`

	// Tenants are per-tenant limits (tenants.go); API configures the api service.
	Tenants map[string]TenantLimits `yaml:"tenants"`
	API     API                     `yaml:"api"`

	// Reasoning is what reasoning models are asked for (effort, thinking
	// budget, summaries), by default and per model.
	Reasoning Reasoning `yaml:"reasoning"`
}

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		NATSURL:     "nats://127.0.0.1:4222",
		NATSDeclare: "auto",
		DataDir:     ".herald",
		Primary:     Provider{Provider: "openai", Model: "gpt-4o-mini"},
		Agent:       Agent{MaxTurns: 90, APIMaxRetries: 3, RepeatThreshold: 3},
		Compression: Compression{Enabled: true, Threshold: 0.5, ProtectFirstN: 3,
			ProtectLastN: 20, TargetRatio: 0.2},
		Delegation: Delegation{MaxIterations: 50, MaxConcurrentChildren: 3},
		Approvals:  Approvals{Mode: "manual", Timeout: 60 * time.Second},
		ToolOutput: ToolOutput{TerminalMaxChars: 50000, ReadFileMaxLines: 2000,
			MaxResultChars: 100000, TerminalTimeout: 180 * time.Second},
		Retry: Retry{BaseDelay: 2 * time.Second, MaxDelay: 60 * time.Second,
			RateBaseDelay: 5 * time.Second, RateMaxDelay: 120 * time.Second, CallTimeout: 10 * time.Minute},
		Tenant:   "default",
		Replicas: 1,
		Sandbox:  DefaultSandbox(),
	}
}

// fileModel accepts Hermes' `model:` as a plain string or as a mapping.
type fileModel struct {
	Default  string `yaml:"default"`
	Name     string `yaml:"name"`
	Provider string `yaml:"provider"`
	BaseURL  string `yaml:"base_url"`
	APIMode  string `yaml:"api_mode"`
	KeyEnv   string `yaml:"api_key_env"`
}

func (m *fileModel) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		m.Default = n.Value
		return nil
	}
	type plain fileModel
	return n.Decode((*plain)(m))
}

type file struct {
	Config `yaml:",inline"`
	Model  *fileModel `yaml:"model"`
}

// Load reads path (if it exists; "" means herald.yaml in the working dir or
// HERALD_CONFIG), then the environment, and validates the result.
func Load(path string) (Config, error) {
	cfg := Default()
	explicit := path != ""
	if path == "" {
		path = os.Getenv("HERALD_CONFIG")
		explicit = path != ""
	}
	if path == "" {
		path = "herald.yaml"
	}
	if err := cfg.readFile(path, explicit); err != nil {
		return Config{}, err
	}
	cfg.applyEnv(os.Getenv)
	return cfg, cfg.Validate()
}

func (c *Config) readFile(path string, mustExist bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	f := file{Config: *c}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	*c = f.Config
	if m := f.Model; m != nil {
		c.Primary.Model = firstNonEmpty(m.Default, m.Name, c.Primary.Model)
		c.Primary.Provider = firstNonEmpty(m.Provider, c.Primary.Provider)
		c.Primary.BaseURL = firstNonEmpty(m.BaseURL, c.Primary.BaseURL)
		c.Primary.APIMode = firstNonEmpty(m.APIMode, c.Primary.APIMode)
		c.Primary.APIKeyEnv = firstNonEmpty(m.KeyEnv, c.Primary.APIKeyEnv)
	}
	return nil
}

// applyEnv overlays the environment; getenv is a parameter so tests need not
// touch the process environment.
func (c *Config) applyEnv(getenv func(string) string) {
	set := func(dst *string, key string) {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	set(&c.NATSURL, "HERALD_NATS_URL")
	set(&c.NATSInboxPrefix, "HERALD_NATS_INBOX_PREFIX")
	set(&c.NATSDeclare, "HERALD_NATS_DECLARE")
	set(&c.ClickHouseDSN, "HERALD_CLICKHOUSE_DSN")
	set(&c.DataDir, "HERALD_DATA_DIR")
	set(&c.Workspace, "HERALD_WORKSPACE")
	set(&c.Primary.Model, "HERALD_MODEL")
	set(&c.Primary.Provider, "HERALD_PROVIDER")
	set(&c.Primary.BaseURL, "HERALD_BASE_URL")
	set(&c.Primary.APIMode, "HERALD_API_MODE")
	set(&c.DashboardToken, "HERALD_DASHBOARD_TOKEN")
	set(&c.Sandbox.Mode, "HERALD_SANDBOX")
	if v := getenv("HERALD_DASHBOARD_ALLOWED_HOSTS"); v != "" {
		c.Dashboard.AllowedHosts = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
	}
	c.Primary.APIKey = ResolveKey(c.Primary, getenv, true)
	for i := range c.FallbackProviders {
		c.FallbackProviders[i].APIKey = ResolveKey(c.FallbackProviders[i], getenv, false)
	}
	c.Budgets.resolveSecret(getenv)
}

// ResolveKey finds a provider's key: its api_key_env, then (for the primary)
// HERALD_API_KEY, then the provider's conventional variable.
func ResolveKey(p Provider, getenv func(string) string, primary bool) string {
	if p.APIKeyEnv != "" {
		if v := getenv(p.APIKeyEnv); v != "" {
			return v
		}
	}
	if primary {
		if v := getenv("HERALD_API_KEY"); v != "" {
			return v
		}
	}
	switch strings.ToLower(p.Provider) {
	case "anthropic":
		return getenv("ANTHROPIC_API_KEY")
	case "openrouter":
		return getenv("OPENROUTER_API_KEY")
	default:
		return getenv("OPENAI_API_KEY")
	}
}

// Validate fails fast on settings no service could work with.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	check(c.Agent.MaxTurns > 0, "agent.max_turns must be positive, got %d", c.Agent.MaxTurns)
	check(c.Agent.APIMaxRetries >= 0, "agent.api_max_retries must not be negative")
	check(c.Compression.Threshold > 0 && c.Compression.Threshold <= 1, "compression.threshold must be in (0, 1], got %v", c.Compression.Threshold)
	check(c.Compression.ProtectFirstN >= 0 && c.Compression.ProtectLastN >= 0, "compression.protect_first_n/protect_last_n must not be negative")
	check(c.Delegation.MaxIterations > 0, "delegation.max_iterations must be positive")
	check(c.Delegation.MaxConcurrentChildren > 0, "delegation.max_concurrent_children must be positive")
	check(c.NATSDeclare == "auto" || c.NATSDeclare == "check", "nats_declare must be auto or check, got %q", c.NATSDeclare)
	switch c.Approvals.Mode {
	case "manual", "off", "deny":
	default:
		errs = append(errs, fmt.Errorf("approvals.mode must be manual, off or deny, got %q", c.Approvals.Mode))
	}
	if err := c.Sandbox.Validate(); err != nil {
		errs = append(errs, err)
	}
	check(c.Hooks.PreToolCall == "" || c.Hooks.PreToolCall == "optional" || c.Hooks.PreToolCall == HookRequired,
		"hooks.pre_tool_call must be optional or required, got %q", c.Hooks.PreToolCall)
	check(c.Hooks.TimeoutMS >= 0, "hooks.timeout_ms must not be negative")
	check(c.CodeExecution.Timeout >= 0 && c.CodeExecution.MaxToolCalls >= 0 && c.CodeExecution.MaxOutputChars >= 0,
		"code_execution limits must not be negative")
	check(c.Files.MaxWriteBytes >= 0 && c.Files.MaxWorkspaceBytes >= 0, "files limits must not be negative")
	for name, m := range c.MCPServers {
		for _, p := range m.Sandbox.ReadOnly {
			check(filepath.IsAbs(p), "mcp_servers.%s.sandbox.read_only: %q is not an absolute path", name, p)
		}
	}
	for i, p := range c.FallbackProviders {
		check(p.Model != "", "fallback_providers[%d].model is required", i)
	}
	check(c.Tenant == "" || proto.IsToken(c.Tenant), "tenant: %q is not a tenant name (letters, digits, '-' and '_', 1 to 128 of them)", c.Tenant)
	errs = append(errs, c.Budgets.validate()...)
	errs = append(errs, c.validateTenants()...)
	errs = append(errs, c.validatePools()...)
	errs = append(errs, c.validateLimits()...)
	if err := c.Reasoning.Validate(); err != nil {
		errs = append(errs, err)
	}
	for m, p := range c.Pricing {
		if err := p.Validate(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WorkspaceRoot is the tool runner's root: HERALD_WORKSPACE, else <data-dir>/workspace.
func (c Config) WorkspaceRoot() string {
	if c.Workspace != "" {
		return c.Workspace
	}
	return filepath.Join(c.DataDir, "workspace")
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
