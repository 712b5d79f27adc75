package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/stretchr/testify/require"
)

// setupDemoList is the demo's list in scripts/setup.sh: the `want` lines
// before the --test section, program -> required.
func setupDemoList(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../../scripts/setup.sh")
	require.NoError(t, err)
	demo, _, found := strings.Cut(string(data), `if [ "$mode" = "--test" ]`)
	require.True(t, found, "setup.sh has a --test section")
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^want (\S+) (required|optional) (.+)$`).FindAllStringSubmatch(demo, -1) {
		out[m[1]] = m[2] == "required"
	}
	require.NotEmpty(t, out, "setup.sh's demo list")
	return out
}

// make demo runs scripts/setup.sh with no argument: it must install every
// program `herald demo` starts, required where the demo cannot run without
// it (bubblewrap: the tool runner refuses to start), and nothing else.
func TestSetupInstallsWhatTheDemoStarts(t *testing.T) {
	listed := setupDemoList(t)
	cfg := config.Default() // the demo on a fresh machine: no herald.yaml, no DSN
	started := map[string]bool{}
	for _, p := range demoPrograms(cfg) {
		started[p.name] = p.required
	}
	require.Equal(t, started, listed, "scripts/setup.sh's demo list (program: required) against the programs herald demo starts")
	require.True(t, listed["bwrap"], "the sandbox is required")

	makefile, err := os.ReadFile("../../Makefile")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^demo: .*setup`, string(makefile), "make demo runs the setup first")
	require.Regexp(t, `(?m)^setup:\n\t\./scripts/setup\.sh\n`, string(makefile), "make setup installs the demo's list (no --test)")
}

// A machine without bwrap is told what to install before anything starts.
func TestDemoNamesTheMissingSandbox(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := missingDemoProgram(config.Default())
	require.ErrorContains(t, err, "the demo needs bwrap")
	require.ErrorContains(t, err, "scripts/setup.sh")
	none := config.Default()
	none.Sandbox.Mode = config.SandboxNone
	require.NoError(t, missingDemoProgram(none), "an unconfined demo (sandbox.mode: none) needs no bwrap")
	require.False(t, slices.ContainsFunc(demoPrograms(none), func(p demoProgram) bool { return p.name == "bwrap" }))
}
