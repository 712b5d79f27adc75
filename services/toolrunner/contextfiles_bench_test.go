package toolrunner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/heraldrun/herald/pkg/heraldtest"
	"github.com/heraldrun/herald/pkg/service"
	"github.com/heraldrun/herald/proto"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// contextBenchWorkspace is a workspace with a 2 KB AGENTS.md and a 60 KB
// CLAUDE.md (cut to its head and tail).
func contextBenchWorkspace(b *testing.B) string {
	root := b.TempDir()
	require.NoError(b, os.MkdirAll(filepath.Join(root, "proj"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(root, "proj", "AGENTS.md"), []byte(strings.Repeat("rule\n", 400)), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(root, "proj", "CLAUDE.md"), []byte(strings.Repeat("note\n", 12000)), 0o644))
	return root
}

// BenchmarkContextFiles measures what a session start pays for its context
// files: reading them confined to the workspace (os.Root, every folder
// checked, at most the cap read), and the whole request/reply from the loop
// to a runner over an embedded NATS server; beside the loop's old read by
// name.
//
//	go test -run '^$' -bench ContextFiles -benchmem ./services/toolrunner
func BenchmarkContextFiles(b *testing.B) {
	root := contextBenchWorkspace(b)
	req := proto.ContextFilesRequest{SessionID: "s1", Workspace: "proj"}
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if got := readContextFiles(root, req); len(got.Files) != 2 {
				b.Fatalf("read %+v", got)
			}
		}
	})
	// The loop's old way, for comparison: each file read whole by name,
	// following any symlink, from the loop's own disk.
	b.Run("read-by-name-old", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for _, name := range proto.ContextFileNames {
				if _, err := os.ReadFile(filepath.Join(root, "proj", name)); err == nil {
					n++
				}
			}
			if n != 2 {
				b.Fatalf("read %d files", n)
			}
		}
	})
	b.Run("request", func(b *testing.B) {
		tb := heraldtest.StartBus(b)
		cfg := DefaultConfig()
		cfg.WorkspaceRoot, cfg.CheckpointDir = root, b.TempDir()
		svc, err := New(cfg, service.Deps{NC: tb.NC, JS: tb.JS, Log: zerolog.Nop(), Config: config.Default()})
		require.NoError(b, err)
		require.NoError(b, svc.Start(b.Context()))
		b.Cleanup(func() { _ = svc.Shutdown(b.Context()) })
		data, _ := json.Marshal(req)
		for b.Loop() {
			msg, err := tb.NC.Request(bus.ContextFiles(bus.DefaultPool), data, 5*time.Second)
			require.NoError(b, err)
			if len(msg.Data) < proto.MaxContextFileBytes {
				b.Fatalf("short reply: %d bytes", len(msg.Data))
			}
		}
	})
}
