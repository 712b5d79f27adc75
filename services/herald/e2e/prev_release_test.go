package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/embedded"
	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// prevRelease is the release whose data folder the fixture holds: the last
// one that kept transcripts under herald.session.<sid>.log.
const (
	prevRelease = "5d2972c"
	prevFixture = "testdata/data-folder-" + prevRelease + ".tar.gz"
	prevSession = "s-prev-release"
)

// prevScript answers the fixture's session: a tool call and an answer to
// the first prompt, a plain answer to every later one.
func prevScript(r *scripted.Request) scripted.Reply {
	if r.LastMessage().Role == "tool" {
		return scripted.Text("first answer")
	}
	texts := userTexts(r)
	switch last := texts[len(texts)-1]; last {
	case "first prompt":
		return scripted.Tool("write_file", `{"path":"a.txt","content":"from the old release\n"}`)
	default:
		return scripted.Text("answer to " + last)
	}
}

// A data folder written by the previous release (its transcripts under the
// public herald.session.<sid>.log) is moved in place when the new binary
// starts on it, and its session continues with its whole history.
//
// The fixture is that release's own output. To make it again, build the
// release (git archive 5d2972c | tar -x -C /tmp/prev && cd /tmp/prev &&
// go build -o herald-prev ./services/herald) and run this test with
// HERALD_PREV_BIN=/tmp/prev/herald-prev HERALD_UPDATE_FIXTURE=1.
func TestDataFolderOfThePreviousReleaseContinues(t *testing.T) {
	model, err := scripted.Start(prevScript)
	require.NoError(t, err)
	defer model.Close()
	env := map[string]string{"HERALD_BASE_URL": model.URL, "HERALD_MODEL": "test-model"}
	if os.Getenv("HERALD_UPDATE_FIXTURE") == "1" {
		writePrevFixture(t, env)
	}
	dir := t.TempDir()
	untar(t, prevFixture, dir)

	out, code := runHeraldIn(t, dir, env, "run", "--session", prevSession, "third prompt")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "answer to third prompt")
	last := model.Requests()[model.Calls()-1]
	require.Equal(t, []string{"first prompt", "second prompt", "third prompt"}, userTexts(last),
		"the session continues with the history the old release wrote")
	var assistants []string
	for _, m := range last.Messages {
		if m.Role == "assistant" && m.Text() != "" {
			assistants = append(assistants, m.Text())
		}
	}
	require.Equal(t, []string{"first answer", "answer to second prompt"}, assistants)

	shown, code := runHeraldIn(t, dir, env, "sessions", "show", prevSession)
	require.Equal(t, 0, code, shown)
	for _, want := range []string{"first prompt", "write_file", "first answer", "second prompt", "third prompt", "answer to third prompt"} {
		require.Contains(t, shown, want)
	}

	// In the store: nothing left under the public subject, the old subject
	// no longer declared.
	srv, err := embedded.Start(embedded.Options{StoreDir: filepath.Join(dir, ".herald", "nats"), Log: zerolog.Nop()})
	require.NoError(t, err)
	defer srv.Shutdown()
	nc, err := srv.Connect("check")
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, bus.StreamSessions)
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(">"))
	require.NoError(t, err)
	require.NotContains(t, info.Config.Subjects, bus.LegacySessionLogFilter)
	for subject := range info.State.Subjects {
		require.False(t, strings.HasSuffix(subject, ".log") && strings.HasPrefix(subject, "herald.session."),
			"%s is still under the public namespace", subject)
	}
	require.Positive(t, info.State.Subjects[bus.SessionLog(prevSession)])
}

// writePrevFixture runs the previous release's binary (HERALD_PREV_BIN) for
// two turns of one session and stores its data folder as the fixture.
func writePrevFixture(t *testing.T, env map[string]string) {
	prev := os.Getenv("HERALD_PREV_BIN")
	require.NotEmpty(t, prev, "HERALD_UPDATE_FIXTURE needs HERALD_PREV_BIN, the %s binary", prevRelease)
	dir := t.TempDir()
	for _, prompt := range []string{"first prompt", "second prompt"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := heraldCmd(t, ctx, dir, env, "run", "--session", prevSession, prompt)
		cmd.Path = prev
		cmd.Args[0] = prev
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "%s", out)
	}
	var names []string
	root := filepath.Join(dir, ".herald")
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".lock") {
			names = append(names, path)
		}
		return err
	}))
	slices.Sort(names)
	f, err := os.Create(prevFixture)
	require.NoError(t, err)
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, name := range names {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		rel, err := filepath.Rel(dir, name)
		require.NoError(t, err)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}))
		_, err = tw.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
}

func untar(t *testing.T, archive, dir string) {
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.True(t, strings.HasPrefix(path, dir+string(os.PathSeparator)), fmt.Sprintf("%s leaves the folder", h.Name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o644))
	}
}
