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
// binary built by the Dockerfile's build stage, with the command and environment compose.yaml gives its
// container (herald.yaml of deploy/compose, HERALD_NATS_URL with the
// toolrunner user), next to the other services, and a task's tool call is
// answered by it.
func TestComposeToolRunnerServesWithItsEnvironment(t *testing.T) {
	bin := dockerBuild(t)
	s := startSecured(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, bus.Ensure(ctx, s.connect(t, "admin").js, 1))
	cfg := stackConfig(t, "")
	for _, name := range service.Names {
		if name != "toolrunner" {
			startService(t, s, cfg, name)
		}
	}

	svc := loadCompose(t).Services["toolrunner"]
	configFile, err := filepath.Abs(filepath.Join(composeDir, "herald.yaml"))
	require.NoError(t, err)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HERALD_DATA_DIR=" + t.TempDir()}
	for k, v := range svc.Environment {
		switch k {
		case "HERALD_NATS_URL":
			v = strings.NewReplacer("${TOOLRUNNER_PASSWORD}", password("toolrunner"), "@nats:4222", "@"+s.addr).Replace(v)
		case "HERALD_CONFIG":
			v = configFile
		case "HERALD_WORKSPACE":
			v = cfg.Workspace
		}
		require.NotContains(t, v, "${", "%s is resolved", k)
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(bin, svc.Command...)
	cmd.Env = env
	var stderr heraldtest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})

	task := proto.Task{Prompt: taskPrompt, SessionID: "s-compose", TaskID: "t-compose"}
	res, _ := runTask(t, s, task)
	require.Equal(t, proto.ExitTextResponse, res.ExitReason, "tool runner output:\n%s", stderr.String())
	tools := transcriptTools(t, s, task.SessionID)
	require.Len(t, tools, 3)
	require.Contains(t, tools[0], "green tea every day", "the containerised runner read the file")
	require.Contains(t, tools[1], "the user answered: green", "and heard the client's answer")
	require.Empty(t, s.violations(), "the runner needed nothing its user is not granted")
	require.NotContains(t, stderr.String(), password("toolrunner"), "the runner's output never shows its NATS password")
	select {
	case err := <-done:
		t.Fatalf("herald serve toolrunner exited: %v\n%s", err, stderr.String())
	default:
	}
}
