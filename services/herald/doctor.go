package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/services/accounting"
	"github.com/heraldrun/herald/services/gateway"
	"github.com/heraldrun/herald/services/herald/internal/app"
	"github.com/heraldrun/herald/services/toolrunner"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Check statuses.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
	checkSkip = "skip"
)

// check is one line of `herald doctor`: what was looked at, what was
// found, and for anything not ok what to do about it.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

type doctorReport struct {
	OK     bool    `json:"ok"`
	Checks []check `json:"checks"`
}

// probeTimeout bounds each check that talks to something.
const probeTimeout = 30 * time.Second

func cmdDoctor(ctx context.Context, args []string, cio cliIO) int {
	fs := newFlagSet("doctor", cio.err)
	var c common
	c.register(fs)
	jsonOut := fs.Bool("json", false, `print {"ok": bool, "checks": [...]} only`)
	strict := fs.Bool("strict", false, "unknown keys in herald.yaml fail the check (default: a warning)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	c.stderr = nil // unknown keys are the config check's to report
	var rep doctorReport
	if cfg, err := c.load(); err != nil {
		// A configuration that does not load is this check's finding, in
		// the report's own form: the other checks need it, so they skip.
		rep = doctorReport{Checks: []check{{Name: "config", Status: checkFail, Detail: err.Error(),
			Fix: "correct the file (YAML syntax, values); herald doctor checks the rest once it loads"}}}
	} else {
		rep = diagnose(ctx, cfg)
		rep.Checks = append([]check{configCheck(c, *strict)}, rep.Checks...)
		rep.OK = rep.OK && rep.Checks[0].Status != checkFail
	}
	if *jsonOut {
		enc := json.NewEncoder(cio.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		writeChecks(cio, rep)
	}
	if !rep.OK {
		return exitFail
	}
	return exitOK
}

func diagnose(ctx context.Context, cfg config.Config) doctorReport {
	if os.Getenv("HERALD_WORKSPACE") == "" { // as herald run and chat use it in-process
		if cwd, err := workingDir(); err == nil {
			cfg.Workspace = cwd
		}
	}
	var checks []check
	checks = append(checks, natsChecks(ctx, cfg)...)
	checks = append(checks, clickHouseCheck(ctx, cfg))
	checks = append(checks, providerChecks(ctx, cfg)...)
	checks = append(checks, mcpChecks(ctx, cfg)...)
	checks = append(checks, sandboxCheck(cfg), workspaceCheck(cfg))
	rep := doctorReport{OK: true, Checks: checks}
	for _, c := range checks {
		rep.OK = rep.OK && c.Status != checkFail
	}
	return rep
}

var statusMark = map[string]string{checkOK: "✓ ok", checkWarn: "! warn", checkFail: "✗ FAIL", checkSkip: "- skip"}

func writeChecks(cio cliIO, rep doctorReport) {
	tw := tabwriter.NewWriter(cio.out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tDETAIL")
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", statusMark[c.Status], c.Name, c.Detail)
		if c.Fix != "" && c.Status != checkOK {
			fmt.Fprintf(tw, "\t\t→ fix: %s\n", c.Fix)
		}
	}
	_ = tw.Flush()
	if rep.OK {
		fmt.Fprintln(cio.out, "\nNo check failed.")
	} else {
		fmt.Fprintln(cio.out, "\nSome checks failed: see the fixes above.")
	}
}

func natsChecks(ctx context.Context, cfg config.Config) []check {
	where := app.RedactURL(cfg.NATSURL)
	nc, err := nats.Connect(cfg.NATSURL, nats.Timeout(2*time.Second), nats.Name("herald-doctor"), app.InboxOption(cfg))
	if err != nil {
		return []check{
			{Name: "nats", Status: checkWarn, Detail: fmt.Sprintf("no NATS at %s (%v): herald run and chat start Herald in-process; herald serve needs one", where, err),
				Fix: "start one with `herald up`, or point HERALD_NATS_URL at yours"},
			{Name: "streams", Status: checkSkip, Detail: "no NATS to look at"},
		}
	}
	defer nc.Close()
	out := []check{{Name: "nats", Status: checkOK, Detail: fmt.Sprintf("NATS %s at %s", nc.ConnectedServerVersion(), where)}}
	js, err := jetstream.New(nc)
	if err == nil {
		actx, cancel := context.WithTimeout(ctx, probeTimeout)
		_, err = js.AccountInfo(actx)
		cancel()
	}
	if err != nil {
		return append(out, check{Name: "streams", Status: checkFail, Detail: fmt.Sprintf("JetStream does not answer at %s: %v", where, err),
			Fix: "run nats-server with JetStream enabled (-js), or use `herald up`"})
	}
	return append(out, streamsCheck(ctx, js, cfg.Replicas))
}

// streamsCheck compares each stream on the server with what Herald declares.
func streamsCheck(ctx context.Context, js jetstream.JetStream, replicas int) check {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var missing, differ, seen []string
	for _, want := range bus.Streams(replicas) {
		s, err := js.Stream(ctx, want.Name)
		if err != nil {
			missing = append(missing, want.Name)
			continue
		}
		got := s.CachedInfo().Config
		seen = append(seen, streamSettings(got))
		if d := streamDiff(want, got); d != "" {
			differ = append(differ, want.Name+": "+d)
		}
	}
	for _, b := range bus.Buckets(replicas) {
		if _, err := js.KeyValue(ctx, b.Bucket); err != nil {
			missing = append(missing, "KV "+b.Bucket)
		}
	}
	switch {
	case len(missing) > 0:
		return check{Name: "streams", Status: checkFail, Detail: "not declared: " + strings.Join(missing, ", "),
			Fix: "herald declare (as a NATS user allowed to manage streams), or start a Herald service with nats_declare: auto"}
	case len(differ) > 0:
		return check{Name: "streams", Status: checkWarn, Detail: "declared with other settings: " + strings.Join(differ, "; "),
			Fix: "herald declare updates them to this version's settings"}
	}
	return check{Name: "streams", Status: checkOK, Detail: fmt.Sprintf("%d streams as declared, and %d KV buckets: %s",
		len(seen), len(bus.Buckets(replicas)), strings.Join(seen, ", "))}
}

func streamSettings(c jetstream.StreamConfig) string {
	s := fmt.Sprintf("%s %s/%s/R%d", c.Name, c.Retention, c.Storage, c.Replicas)
	if c.MaxAge > 0 {
		s += fmt.Sprintf("/max age %dh", int(c.MaxAge.Hours()))
	}
	return s
}

func streamDiff(want, got jetstream.StreamConfig) string {
	var d []string
	if !slices.Equal(want.Subjects, got.Subjects) {
		d = append(d, fmt.Sprintf("subjects %v, want %v", got.Subjects, want.Subjects))
	}
	if want.Retention != got.Retention {
		d = append(d, fmt.Sprintf("retention %s, want %s", got.Retention, want.Retention))
	}
	if want.Storage != got.Storage {
		d = append(d, fmt.Sprintf("storage %s, want %s", got.Storage, want.Storage))
	}
	if want.MaxAge != got.MaxAge {
		d = append(d, fmt.Sprintf("max age %s, want %s", got.MaxAge, want.MaxAge))
	}
	if want.Replicas != got.Replicas {
		d = append(d, fmt.Sprintf("replicas %d, want %d", got.Replicas, want.Replicas))
	}
	return strings.Join(d, ", ")
}

func clickHouseCheck(ctx context.Context, cfg config.Config) check {
	dsn := clickHouseDSN(cfg)
	if dsn == "" || cfg.ClickHouseDSN == "" && !chAnswers(dsn) {
		dsn = runningPrivateCH(cfg.DataDir)
	}
	if dsn == "" {
		if c, ok := privateCHCheck(); ok {
			return c
		}
		return check{Name: "clickhouse", Status: checkWarn, Detail: "not configured: usage waits in the USAGE stream and herald cost has nothing to read",
			Fix: "set HERALD_CLICKHOUSE_DSN=clickhouse://127.0.0.1:9000/herald, or install clickhouse-server (herald up then starts a private one)"}
	}
	where := redactDSN(dsn)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	st, err := accounting.QuerySchemaStatus(ctx, dsn)
	var unreachable *accounting.UnreachableError
	switch {
	case errors.As(err, &unreachable):
		return check{Name: "clickhouse", Status: checkFail, Detail: fmt.Sprintf("%s does not answer: %v", where, err),
			Fix: "start ClickHouse there, or fix HERALD_CLICKHOUSE_DSN"}
	case err != nil:
		return check{Name: "clickhouse", Status: checkWarn, Detail: fmt.Sprintf("%s: %v", where, err), Fix: "herald migrate"}
	case st.Applied < st.Latest:
		return check{Name: "clickhouse", Status: checkWarn,
			Detail: fmt.Sprintf("ClickHouse %s at %s: schema version %d, this Herald needs %d", st.Server, where, st.Applied, st.Latest),
			Fix:    "herald migrate (accounting also applies it when it starts)"}
	}
	return check{Name: "clickhouse", Status: checkOK, Detail: fmt.Sprintf("ClickHouse %s at %s: schema version %d (latest)", st.Server, where, st.Applied)}
}

// redactDSN shows where a DSN points without its password.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "the configured ClickHouse"
	}
	return u.Redacted()
}

func providerChecks(ctx context.Context, cfg config.Config) []check {
	var out []check
	for i, p := range append([]config.Provider{cfg.Primary}, cfg.FallbackProviders...) {
		name, keyFix := "provider primary", "set HERALD_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY for the provider)"
		if i > 0 {
			name = fmt.Sprintf("provider fallback %d", i)
			keyFix = "set the variable its api_key_env names"
			if p.APIKeyEnv != "" {
				keyFix = "set " + p.APIKeyEnv
			}
		}
		out = append(out, providerCheck(ctx, name, p, cfg, keyFix))
	}
	return out
}

func providerCheck(ctx context.Context, name string, p config.Provider, cfg config.Config, keyFix string) check {
	if p.Model == "" {
		return check{Name: name, Status: checkFail, Detail: "no model configured", Fix: "set HERALD_MODEL or model.default in herald.yaml"}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r := gateway.Probe(ctx, p, cfg.Pricing, cfg.Providers)
	what := fmt.Sprintf("%s %s (%s)", r.Provider, r.Model, r.Mode)
	switch {
	case r.Class == gateway.ClassAuth:
		return check{Name: name, Status: checkFail, Detail: what + ": the key was refused: " + r.Detail, Fix: keyFix}
	case r.Class != "":
		return check{Name: name, Status: checkFail, Detail: fmt.Sprintf("%s: %s", what, r.Detail), Fix: providerFix(r.Class)}
	}
	facts := []string{"key accepted", fmt.Sprintf("streamed in %s", r.Latency.Round(time.Millisecond))}
	status, fix := checkOK, ""
	warn := func(fact, f string) {
		facts = append(facts, fact)
		if status == checkOK {
			status, fix = checkWarn, f
		}
	}
	if r.ToolCall {
		facts = append(facts, "tool call parsed")
	} else {
		warn("no tool call (the model answered without calling the tool it was asked to)",
			"use a model that supports tool calling: the agent acts only through tools")
	}
	if u := r.Usage; u != nil && u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens+u.OutputTokens > 0 {
		facts = append(facts, fmt.Sprintf("usage reported (in %d, out %d)", u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens, u.OutputTokens))
	} else {
		warn("no usage reported", "costs of this provider will read 0: check that it reports usage on streamed answers")
	}
	if r.PriceSource == "unknown" {
		r.PriceSource = importedPriceSource(ctx, cfg, p.Model) // herald prices import, on the bus
	}
	if r.PriceSource == "unknown" || r.PriceSource == "" {
		warn("no price known for "+p.Model, fmt.Sprintf("add pricing: {%s: {input: …, output: …}} (USD per million tokens) to herald.yaml, or import a catalogue (herald prices import)", p.Model))
	} else {
		facts = append(facts, "price "+r.PriceSource)
	}
	return check{Name: name, Status: status, Detail: what + ": " + strings.Join(facts, " · "), Fix: fix}
}

func providerFix(class gateway.ErrorClass) string {
	switch class {
	case gateway.ClassModelNotFound:
		return "check the model name (HERALD_MODEL / model.default)"
	case gateway.ClassNetwork, gateway.ClassTimeout:
		return "check HERALD_BASE_URL / base_url and that the server is up"
	case gateway.ClassBilling:
		return "add credit to the provider account"
	case gateway.ClassRateLimit, gateway.ClassOverloaded:
		return "the provider is busy: try again later, or add fallback_providers"
	}
	return "check the provider settings in herald.yaml (provider, base_url, api_mode)"
}

func mcpChecks(ctx context.Context, cfg config.Config) []check {
	if len(cfg.MCPServers) == 0 {
		return []check{{Name: "mcp", Status: checkSkip, Detail: "no mcp_servers configured"}}
	}
	names := make([]string, 0, len(cfg.MCPServers))
	for n := range cfg.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []check
	for _, n := range names {
		cctx, cancel := context.WithTimeout(ctx, probeTimeout)
		tools, err := toolrunner.ProbeMCP(cctx, cfg, n)
		cancel()
		name := "mcp " + n
		switch {
		case err != nil:
			out = append(out, check{Name: name, Status: checkFail, Detail: fmt.Sprintf("%s did not start or list its tools: %v", cfg.MCPServers[n].Command, err),
				Fix: fmt.Sprintf("check mcp_servers.%s in herald.yaml; run `%s` by hand to see why", n, cfg.MCPServers[n].Command)})
		case len(tools) == 0:
			out = append(out, check{Name: name, Status: checkWarn, Detail: "started but offers no tools", Fix: "check the server's own configuration"})
		default:
			out = append(out, check{Name: name, Status: checkOK, Detail: fmt.Sprintf("started; %d tools: %s", len(tools), strings.Join(tools, ", "))})
		}
	}
	return out
}

// sandboxCheck runs a command under Bubblewrap as the terminal tool does.
func sandboxCheck(cfg config.Config) check {
	if cfg.Sandbox.Mode == config.SandboxNone {
		return check{Name: "sandbox", Status: checkSkip, Detail: "sandbox.mode is none: commands run with the tool runner's own view of the machine",
			Fix: "remove sandbox.mode: none (and install bubblewrap) to confine commands"}
	}
	sb, err := toolrunner.NewSandbox(cfg.Sandbox, zerolog.Nop())
	if err != nil {
		fix := "apt-get install bubblewrap (or set sandbox.mode: none in herald.yaml to run commands unsandboxed)"
		if errors.Is(err, toolrunner.ErrNoSandbox) && !strings.Contains(err.Error(), "not installed") {
			fix = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; where AppArmor restricts them, kernel.apparmor_restrict_unprivileged_userns=0 or a profile for bwrap): bwrap runs unprivileged, as sandbox.uid when herald is root; or set sandbox.mode: none"
		}
		return check{Name: "sandbox", Status: checkFail, Detail: err.Error(), Fix: fix}
	}
	defer sb.Close()
	return check{Name: "sandbox", Status: checkOK, Detail: "bwrap starts a sandbox with the configured limits"}
}

// workspaceCheck writes and removes a file where herald run's tools work.
func workspaceCheck(cfg config.Config) check {
	dir := cfg.Workspace
	f, err := os.CreateTemp(dir, ".herald-doctor-*")
	if err != nil {
		return check{Name: "workspace", Status: checkFail, Detail: fmt.Sprintf("%s is not writable: %v", dir, err),
			Fix: "run from a folder you can write, or set HERALD_WORKSPACE to one"}
	}
	f.Close()
	os.Remove(f.Name())
	return check{Name: "workspace", Status: checkOK, Detail: fmt.Sprintf("%s writable (state in %s)", dir, filepath.Clean(cfg.DataDir))}
}

// configCheck reports herald.yaml's unknown keys: ignored settings, most
// likely typos. A warning, or a failure with --strict.
func configCheck(c common, strict bool) check {
	path, unknown := c.unknownKeys()
	if path == "" {
		return check{Name: "config", Status: checkOK, Detail: "no herald.yaml: defaults and environment"}
	}
	if len(unknown) == 0 {
		return check{Name: "config", Status: checkOK, Detail: path + ": every key known"}
	}
	names := make([]string, len(unknown))
	for i, k := range unknown {
		names[i] = k.String()
	}
	status := checkWarn
	if strict {
		status = checkFail
	}
	return check{Name: "config", Status: status, Detail: fmt.Sprintf("%s: unknown keys, ignored: %s", path, strings.Join(names, "; ")),
		Fix: "correct or remove them (the keys are listed in docs/CONFIG.md)"}
}
