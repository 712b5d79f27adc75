package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// heraldBin is the herald binary the tests start as users do.
var heraldBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	heraldBin = os.Getenv("HERALD_BIN")
	if heraldBin == "" {
		dir, err := os.MkdirTemp("", "herald-api-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		heraldBin = filepath.Join(dir, "herald")
		out, err := exec.Command("go", "build", "-o", heraldBin, "github.com/heraldrun/herald/services/herald").CombinedOutput()
		if err != nil {
			panic("building herald: " + err.Error() + "\n" + string(out))
		}
	}
	return m.Run()
}

// script answers by what the last user message asks for:
//
//	say:TEXT      streams TEXT in small chunks
//	wait:TEXT     waits a second, then streams TEXT
//	tool:TEXT     runs `echo tool-ran`, then (after a second) streams TEXT
//	clarify:TEXT  asks a clarify question, then answers with TEXT and the choice
//
// anything else is echoed back as "echo: ...".
func script(r *scripted.Request) scripted.Reply {
	last := r.LastMessage()
	user := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			user = m.Text()
		}
	}
	cmd, text := command(user)
	if last.Role == "tool" {
		reply := scripted.Reply{Content: text, ChunkChars: 3}
		if cmd == "tool" {
			reply.Delay = time.Second
		}
		if cmd == "clarify" {
			reply.Content = text + " / chose " + last.Text()
		}
		return reply
	}
	switch cmd {
	case "say":
		return scripted.Reply{Content: text, ChunkChars: 3}
	case "wait":
		return scripted.Reply{Content: text, ChunkChars: 3, Delay: time.Second}
	case "tool":
		return scripted.Tool("terminal", `{"command":"echo tool-ran"}`)
	case "clarify":
		return scripted.Tool("clarify", `{"question":"Which colour?","choices":["red","blue"]}`)
	}
	return scripted.Text("echo: " + strings.TrimSpace(user))
}

func command(user string) (string, string) {
	for _, c := range []string{"say", "wait", "tool", "clarify"} {
		if i := strings.Index(user, c+":"); i >= 0 {
			return c, strings.TrimSpace(user[i+len(c)+1:])
		}
	}
	return "", user
}

// instance is a `herald up` process with the api on its dashboard address.
type instance struct {
	URL     string // http://host:port
	NATSURL string
	dir     string
	env     []string
	model   *scripted.Server
	// up is the `herald up` process and upArgs its arguments (startHerald).
	up     *exec.Cmd
	upArgs []string
}

// startHerald runs `herald up` on a scripted model; yaml, when set, is its
// herald.yaml.
func startHerald(t testing.TB, yaml string) *instance {
	t.Helper()
	model, err := scripted.Start(script)
	require.NoError(t, err)
	t.Cleanup(model.Close)
	dir := t.TempDir()
	h := &instance{dir: dir, model: model, NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)),
		URL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	cfgPath := filepath.Join(dir, "herald.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(yaml), 0o600))
	h.env = []string{
		// Without ClickHouse on PATH usage waits in its stream: these tests are about the api.
		"PATH=" + pathWithout("clickhouse-server"), "HOME=" + os.Getenv("HOME"),
		"HERALD_NATS_URL=" + h.NATSURL, "HERALD_BASE_URL=" + model.URL, "HERALD_MODEL=test-model",
		"HERALD_API_KEY=test", "HERALD_CONFIG=" + cfgPath, "HERALD_DATA_DIR=" + filepath.Join(dir, "data"),
		"HERALD_SANDBOX=none", "HERALD_LOG_LEVEL=warn",
	}
	h.upArgs = []string{"up", "--nats-listen", strings.TrimPrefix(h.NATSURL, "nats://"), "--http", strings.TrimPrefix(h.URL, "http://")}
	h.up = h.start(t, h.upArgs...)
	waitHTTP(t, h.URL)
	return h
}

// start runs a herald command for the test's length; it returns what stops it.
func (h *instance) start(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(heraldBin, args...)
	cmd.Dir, cmd.Env = h.dir, h.env
	var logs bytes.Buffer
	cmd.Stderr = &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("herald %s:\n%s", args[0], logs.String())
		}
	})
	return cmd
}

// cli runs a herald CLI command against the instance and returns its
// stdout, stderr and exit code.
func (h *instance) cli(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(heraldBin, args...)
	cmd.Dir, cmd.Env = h.dir, h.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), code
}

// js connects to the instance's NATS, as an outside observer.
func (h *instance) js(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(h.NATSURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func pathWithout(binary string) string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, binary)); err != nil {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

func waitHTTP(t testing.TB, base string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/v1/runs/none")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	}, 60*time.Second, 50*time.Millisecond, "the api answers on %s", base)
}

// call sends a JSON request and decodes the JSON answer into out (when set).
func call(t *testing.T, method, url, key string, body any, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out), "body: %s", data)
	}
	return resp
}

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Event, Data string
}

// readSSE reads events from body, calling each until it returns false.
func readSSE(body io.Reader, each func(sseEvent) bool) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Data != "" && !each(ev) {
				return nil
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = line[6:]
		}
	}
	return sc.Err()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
