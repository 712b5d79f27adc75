package deploytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// dockerBuild builds the herald binary the way deploy/docker/Dockerfile's
// build stage does, without Docker: the build context is assembled from the
// stage's COPY instructions (honouring Dockerfile.dockerignore) in a fresh
// directory, and the stage's package is built there with the module proxy
// switched off. A file the build needs but the Dockerfile does not copy
// fails it.
func dockerBuild(t *testing.T) string {
	t.Helper()
	ignore := dockerIgnore(t)
	ctxDir, out := t.TempDir(), t.TempDir()
	workdir, build := "/", ""
	inBuild := false
	for _, l := range dockerLines(t) {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			inBuild = strings.HasSuffix(rest, " AS build")
		case "WORKDIR":
			if inBuild {
				workdir = rest
			}
		case "COPY":
			if !inBuild {
				continue
			}
			f := strings.Fields(rest)
			dst := filepath.Join(ctxDir, strings.TrimPrefix(filepath.Join(workdir, f[len(f)-1]), "/src"))
			for _, src := range f[:len(f)-1] {
				copyContext(t, src, dst, strings.HasSuffix(f[len(f)-1], "/"), ignore)
			}
		case "RUN":
			if inBuild && strings.Contains(rest, "go build") {
				build = rest
			}
		}
	}
	require.Equal(t, "/src", workdir, "the build stage works in /src")
	m := regexp.MustCompile(`go build .*-o (\S+) (\./\S+)$`).FindStringSubmatch(build)
	require.NotNil(t, m, "the build stage runs go build -o OUT PKG: %s", build)
	// The package and context are the Dockerfile's; CGO_ENABLED=0 and
	// -trimpath are left out only because they would recompile every
	// dependency instead of reusing the build cache.
	bin := filepath.Join(out, filepath.Base(m[1]))
	c := exec.Command("go", "build", "-o", bin, m[2])
	c.Dir = ctxDir
	c.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=")
	b, err := c.CombinedOutput()
	require.NoError(t, err, "the Dockerfile's build stage builds %s from its context:\n%s", m[2], b)
	return bin
}

// dockerIgnore reads the patterns of Dockerfile.dockerignore.
func dockerIgnore(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(readRepo(t, "deploy", "docker", "Dockerfile.dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func ignored(rel string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutPrefix(p, "**/"); ok {
			if m, _ := filepath.Match(base, filepath.Base(rel)); m {
				return true
			}
		} else if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// copyContext copies repository path src (file or directory) to dst as
// COPY does: into dst when dst names a directory.
func copyContext(t *testing.T, src, dst string, dstIsDir bool, ignore []string) {
	t.Helper()
	root := filepath.Join(repoRoot, src)
	info, err := os.Stat(root)
	require.NoError(t, err, "COPY %s", src)
	if !info.IsDir() {
		if dstIsDir {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		copyFile(t, root, dst)
		return
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		if ignored(filepath.ToSlash(rel), ignore) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		sub, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		copyFile(t, path, filepath.Join(dst, sub))
		return nil
	})
	require.NoError(t, err)
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, data, 0o644))
}

// TestComposeToolRunnerServesWithItsEnvironment runs the tool runner as the
// binary built by the Dockerfile's build stage, with the command and
// environment compose.yaml gives its container (herald.yaml of
// deploy/compose, HERALD_NATS_URL with the toolrunner user). Started before
// anything is declared, it waits and says why; compose's declare step (the
// same binary, as admin) declares the streams; then the runner serves a
// task's tool calls next to the other services, and the server refused
// nothing any of them did.
func TestComposeToolRunnerServesWithItsEnvironment(t *testing.T) {
	bin := dockerBuild(t)
	s := startSecured(t)
	compose := loadCompose(t)
	cfg := stackConfig(t, "")
	runner := startComposeProcess(t, s, bin, compose.Services["toolrunner"], cfg.Workspace)
	require.Eventually(t, func() bool { return strings.Contains(runner.out.String(), "herald declare") }, 20*time.Second,
		20*time.Millisecond, "a runner started before the streams exist says what it waits for:\n%s", runner.out.String())

	decl := startComposeProcess(t, s, bin, compose.Services["declare"], "")
	select {
	case err := <-decl.done:
		require.NoError(t, err, "herald declare:\n%s", decl.out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("herald declare did not finish:\n%s", decl.out.String())
	}
	require.Contains(t, decl.out.String(), "created "+bus.StreamTasks)
	require.Contains(t, decl.out.String(), "streams up to date")

	for _, name := range service.Names {
		if name != "toolrunner" {
			startService(t, s, cfg, name)
		}
	}
	task := proto.Task{Prompt: taskPrompt, SessionID: "s-compose", TaskID: "t-compose"}
	res, _ := runTask(t, s, task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "tool runner output:\n%s", runner.out.String())
	tools := transcriptTools(t, s, task.SessionID)
	require.Len(t, tools, 3)
	require.Contains(t, tools[0], "green tea every day", "the containerised runner read the file")
	require.Contains(t, tools[1], "the user answered: green", "and heard the client's answer")
	require.Empty(t, s.violations(), "neither the runner nor declare needed anything its user is not granted")
	require.NotContains(t, runner.out.String(), password("toolrunner"), "the runner's output never shows its NATS password")
	require.NotContains(t, decl.out.String(), password("admin"), "declare's output never shows the admin password")
	select {
	case err := <-runner.done:
		t.Fatalf("herald serve toolrunner exited: %v\n%s", err, runner.out.String())
	default:
	}

	// A stream drifts from the declaration (an older release, a hand edit):
	// a service user cannot repair it and is told so; admin can.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := s.connect(t, "admin")
	events, err := admin.js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	ecfg := events.CachedInfo().Config
	ecfg.MaxAge = time.Hour
	_, err = admin.js.UpdateStream(ctx, ecfg)
	require.NoError(t, err)
	out, code := runDeclare(t, bin, s.url("toolrunner"), "--timeout", "3s")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "stream EVENTS is out of date (max age 1h0m0s, want 24h0m0s)")
	require.Contains(t, out, `run "herald declare" as a user allowed to`)
	out, code = runDeclare(t, bin, s.url("admin"))
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "updated EVENTS: max age 1h0m0s, want 24h0m0s")
	out, code = runDeclare(t, bin, s.url("toolrunner"))
	require.Equal(t, 0, code, "once declared, checking needs no right to change streams: %s", out)
	require.NotContains(t, out, "updated")
}

// runDeclare runs `herald declare` against natsURL and returns its output
// and exit code.
func runDeclare(t *testing.T, bin, natsURL string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"declare"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HERALD_NATS_URL=" + natsURL}
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}

// composeProcess is bin running a compose service's command.
type composeProcess struct {
	out  *heraldtest.SyncBuffer
	done chan error
}

// startComposeProcess runs bin with svc's command and environment, its
// variables resolved for the secured server, this test's herald.yaml of
// deploy/compose and workspace.
func startComposeProcess(t *testing.T, s *secured, bin string, svc composeService, workspace string) composeProcess {
	t.Helper()
	configFile, err := filepath.Abs(filepath.Join(composeDir, "herald.yaml"))
	require.NoError(t, err)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HERALD_DATA_DIR=" + t.TempDir()}
	vars := []string{"@nats:4222", "@" + s.addr}
	for _, u := range append([]string{"admin"}, serviceUsers...) {
		vars = append(vars, "${"+passwordEnv(u)+"}", password(u))
	}
	for k, v := range svc.Environment {
		switch k {
		case "HERALD_NATS_URL":
			v = strings.NewReplacer(vars...).Replace(v)
		case "HERALD_CONFIG":
			v = configFile
		case "HERALD_WORKSPACE":
			v = workspace
		}
		require.NotContains(t, v, "${", "%s is resolved", k)
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(bin, svc.Command...)
	cmd.Env = env
	p := composeProcess{out: &heraldtest.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { err := cmd.Wait(); close(exited); p.done <- err }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return p
}
