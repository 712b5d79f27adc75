package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// docBlock is a command block a page marks as meant to be run:
//
//	<!-- herald:run -->
//	```sh
//	bin/herald run "…"
//	```
//	<!-- herald:expect
//	text the block's output must contain, one per line
//	-->
type docBlock struct {
	line   int
	cmds   []string
	expect []string
}

var (
	runMarker    = regexp.MustCompile("(?s)<!-- herald:run -->\\s*```sh\\n(.*?)```(\\s*<!-- herald:expect\\n(.*?)-->)?")
	shBlock      = regexp.MustCompile("(?s)```sh\\n(.*?)```")
	backgrounded = regexp.MustCompile(`\s&\s*(#.*)?$`)
)

func docBlocks(t *testing.T, text string) []docBlock {
	t.Helper()
	var out []docBlock
	for _, m := range runMarker.FindAllStringSubmatchIndex(text, -1) {
		b := docBlock{line: strings.Count(text[:m[0]], "\n") + 1}
		for _, l := range strings.Split(text[m[2]:m[3]], "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				b.cmds = append(b.cmds, l)
			}
		}
		if m[6] >= 0 {
			for _, l := range strings.Split(text[m[6]:m[7]], "\n") {
				if l = strings.TrimSpace(l); l != "" {
					b.expect = append(b.expect, l)
				}
			}
		}
		out = append(out, b)
	}
	return out
}

// docsModel answers any task as a real model might: it writes the file the
// prompt names (hello.txt otherwise), then says it is done.
func docsModel(t *testing.T) *scripted.Server {
	name := regexp.MustCompile(`[\w-]+\.txt`)
	model, err := scripted.Start(func(r *scripted.Request) scripted.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return scripted.Text("Done: the file is written.")
		}
		file := "hello.txt"
		for _, m := range r.Messages {
			if m.Role == "user" {
				if f := name.FindString(m.Text()); f != "" {
					file = f
				}
			}
		}
		return scripted.Tool("write_file", fmt.Sprintf(`{"path":%q,"content":"hello\n"}`, file))
	})
	require.NoError(t, err)
	t.Cleanup(model.Close)
	return model
}

// readOnly commands may be run again while the output they show catches up
// (usage reaching ClickHouse, a metric after a turn).
func readOnly(cmd string) bool {
	for _, p := range []string{"bin/herald cost", "herald cost", "bin/herald insights", "herald insights",
		"bin/herald sessions list", "herald sessions list", "bin/herald sessions show", "herald sessions show", "curl "} {
		if strings.HasPrefix(cmd, p) {
			return true
		}
	}
	return false
}

// The README and the docs pages mean what they say: every command block they
// mark is run as written, line by line in one shell environment, in a fresh
// folder (with bin/herald and nats in it), against the scripted model
// (HERALD_BASE_URL; no real key), and each block's marked output is checked.
// The only change is the address: 127.0.0.1:4222 and 127.0.0.1:8080 become
// free ports (HERALD_NATS_URL, NATS_URL and HERALD_HTTP_ADDR say the same),
// so the test runs beside anything else on the machine.
func TestDocsCommandsRunAsWritten(t *testing.T) {
	cli := natsCLI(t)
	root := filepath.Join("..", "..", "..")
	pages := []string{filepath.Join(root, "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, d := range docs {
		// docs/API.md's blocks share shell variables from line to line
		// (RUN=…), so its own test runs each block as one script:
		// TestAPIDocExamples [services/api].
		if filepath.Base(d) != "API.md" {
			pages = append(pages, d)
		}
	}
	ran := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		require.NoError(t, err)
		blocks := docBlocks(t, string(data))
		if filepath.Base(page) == "README.md" {
			require.GreaterOrEqual(t, len(blocks), 2, "the README's quick start is marked to run")
			checkUnmarkedREADMEBlocks(t, string(data))
		}
		if len(blocks) == 0 {
			continue
		}
		ran += len(blocks)
		t.Run(filepath.Base(page), func(t *testing.T) { runPage(t, cli, blocks) })
	}
	require.GreaterOrEqual(t, ran, 4)
}

// checkUnmarkedREADMEBlocks: the README's only command block not run is the
// one of the two make commands.
func checkUnmarkedREADMEBlocks(t *testing.T, text string) {
	t.Helper()
	marked := map[int]bool{}
	for _, m := range runMarker.FindAllStringSubmatchIndex(text, -1) {
		marked[m[2]] = true
	}
	for _, m := range shBlock.FindAllStringSubmatchIndex(text, -1) {
		if marked[m[2]] {
			continue
		}
		var cmds []string
		for _, l := range strings.Split(text[m[2]:m[3]], "\n") {
			if f := strings.Fields(l); len(f) >= 2 {
				cmds = append(cmds, f[0]+" "+f[1])
			}
		}
		require.Equal(t, []string{"make demo", "make test"}, cmds, "an unmarked command block in the README")
	}
	require.True(t, strings.Index(text, "make demo") < strings.Index(text, "make test") &&
		strings.Index(text, "make test") < strings.Index(text, "<!-- herald:run -->"), "the README's first two commands are make demo and make test")
}

func runPage(t *testing.T, cli string, blocks []docBlock) {
	model := docsModel(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.Symlink(heraldBin, filepath.Join(bin, "herald")))
	require.NoError(t, os.Symlink(cli, filepath.Join(bin, "nats")))
	natsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	addr := strings.NewReplacer("127.0.0.1:4222", natsAddr, "127.0.0.1:8080", httpAddr)
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "PWD=" + dir,
		"HERALD_NATS_URL=nats://" + natsAddr, "NATS_URL=nats://" + natsAddr, "HERALD_HTTP_ADDR=" + httpAddr,
		"HERALD_BASE_URL=" + model.URL, "HERALD_CLICKHOUSE_DSN=" + freshClickHouse(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shell := func(line string, out *heraldtest.SyncBuffer) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	var background []*exec.Cmd
	defer func() {
		for _, cmd := range background {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	}()
	for _, b := range blocks {
		var out heraldtest.SyncBuffer
		var again []string
		for _, line := range b.cmds {
			line = addr.Replace(line)
			if name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") {
				value, _, _ = strings.Cut(value, " #")
				env = append(env, name+"="+strings.Trim(strings.TrimSpace(value), `"'`))
				continue
			}
			if backgrounded.MatchString(line) {
				cmd := shell(backgrounded.ReplaceAllString(line, ""), &out)
				require.NoError(t, cmd.Start(), "line %d: %s", b.line, line)
				background = append(background, cmd)
				if strings.Contains(line, "herald up") {
					require.Eventually(t, func() bool { return strings.Contains(out.String(), "Herald is up.") },
						90*time.Second, 50*time.Millisecond, "block at line %d: %s never came up: %s", b.line, line, &out)
				}
				continue
			}
			require.NoError(t, shell(line, &out).Run(), "block at line %d: %s\noutput:\n%s", b.line, line, &out)
			if readOnly(line) {
				again = append(again, line)
			}
		}
		latest := &heraldtest.SyncBuffer{}
		missing := func() []string {
			var m []string
			for _, e := range b.expect {
				e = squash(addr.Replace(e))
				if !strings.Contains(squash(out.String()), e) && !strings.Contains(squash(latest.String()), e) {
					m = append(m, e)
				}
			}
			return m
		}
		if len(missing()) > 0 && len(again) > 0 {
			require.Eventually(t, func() bool {
				latest = &heraldtest.SyncBuffer{}
				for _, line := range again {
					_ = shell(line, latest).Run()
				}
				return len(missing()) == 0
			}, 90*time.Second, 250*time.Millisecond, "block at line %d: documented output not seen\noutput:\n%s\nread again:\n%s", b.line, &out, latest)
		}
		require.Empty(t, missing(), "block at line %d: documented output not seen\noutput:\n%s\nread again:\n%s", b.line, &out, latest)
	}
}

// squash collapses runs of spaces, so an expected table row does not depend
// on the table's column widths.
func squash(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
}
