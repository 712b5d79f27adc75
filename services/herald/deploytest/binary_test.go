package deploytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/stretchr/testify/require"
)

// heraldBinary is HERALD_BIN (make test builds it) or a fresh build.
func heraldBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HERALD_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "herald")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/heraldrun/herald/services/herald").CombinedOutput()
	require.NoError(t, err, "building herald: %s", out)
	return bin
}

// TestComposeToolRunnerServesWithItsEnvironment runs the tool runner as the
// real binary with the command and environment compose.yaml gives its
// container (herald.yaml of deploy/compose, HERALD_NATS_URL with the
// toolrunner user), next to the other services, and a task's tool call is
// answered by it.
func TestComposeToolRunnerServesWithItsEnvironment(t *testing.T) {
	bin := heraldBinary(t)
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
	var stderr syncBuffer
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
