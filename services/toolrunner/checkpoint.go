package toolrunner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
)

// Limits beyond which a workspace is too big to snapshot by copying.
const (
	checkpointMaxFiles = 20000
	checkpointMaxBytes = 200 << 20
)

// Checkpoint is a snapshot of a session's workspace taken before the first
// file-changing tool of a step.
type Checkpoint struct {
	ID      string    `json:"id"`
	Step    int       `json:"step"`
	Created time.Time `json:"created"`
	dir     string
}

var errTooBig = errors.New("workspace too big to checkpoint")

// checkpoint snapshots the call's workspace once per session step. A failure
// is logged, not fatal: the change itself should still happen.
func (s *Service) checkpoint(c *call) {
	if !s.cfg.Checkpoints {
		return
	}
	dir := filepath.Join(sessionCheckpoints(s.cfg, c.req.GetSessionId()), fmt.Sprintf("step-%06d", c.req.GetStep()))
	if _, err := os.Stat(dir); err == nil {
		return
	}
	if err := snapshot(c.ws.root, dir); err != nil {
		_ = os.RemoveAll(dir)
		s.log.Warn().Err(err).Str("session_id", c.req.GetSessionId()).Str("call_id", c.req.GetCallId()).Msg("workspace checkpoint skipped")
	}
}

func sessionCheckpoints(cfg Config, sid string) string {
	return filepath.Join(cfg.CheckpointDir, bus.Token(sid))
}

// snapshot copies the workspace into dir (written under a temporary name and
// renamed, so a half-written snapshot is never taken for a checkpoint).
func snapshot(root, dir string) error {
	if err := checkSize(root); err != nil {
		return err
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := copyTree(root, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

func checkSize(root string) error {
	files, bytes := 0, int64(0)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			files, bytes = files+1, bytes+info.Size()
		}
		if files > checkpointMaxFiles || bytes > checkpointMaxBytes {
			return fmt.Errorf("%w (over %d files or %d MB)", errTooBig, checkpointMaxFiles, checkpointMaxBytes>>20)
		}
		return nil
	})
}

// copyTree copies regular files, folders and symlinks (as links) from src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(p, target, info.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ListCheckpoints returns a session's checkpoints, oldest first.
func ListCheckpoints(cfg Config, sid string) ([]Checkpoint, error) {
	base := sessionCheckpoints(cfg, sid)
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []Checkpoint
	for _, e := range entries {
		var step int
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if _, err := fmt.Sscanf(e.Name(), "step-%d", &step); err != nil {
			continue
		}
		info, _ := e.Info()
		out = append(out, Checkpoint{ID: e.Name(), Step: step, Created: info.ModTime(), dir: filepath.Join(base, e.Name())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out, nil
}

// Rollback makes the session's workspace (folder workspace under the root)
// what it was at checkpoint id, or at the latest checkpoint when id is "":
// files the session changed are restored and files it created are removed.
func Rollback(cfg Config, sid, workspace, id string) (Checkpoint, error) {
	cps, err := ListCheckpoints(cfg, sid)
	if err != nil {
		return Checkpoint{}, err
	}
	cp, found := pickCheckpoint(cps, id)
	if !found {
		return Checkpoint{}, fmt.Errorf("%w %q for session %s", ErrNoCheckpoint, id, sid)
	}
	ws, err := openWorkspace(cfg.WorkspaceRoot, workspace)
	if err != nil {
		return Checkpoint{}, err
	}
	if err := clearDir(ws.root); err != nil {
		return Checkpoint{}, fmt.Errorf("rollback: %w", err)
	}
	if err := copyTree(cp.dir, ws.root); err != nil {
		return Checkpoint{}, fmt.Errorf("rollback: %w", err)
	}
	return cp, nil
}

func pickCheckpoint(cps []Checkpoint, id string) (Checkpoint, bool) {
	if id == "" && len(cps) > 0 {
		return cps[len(cps)-1], true
	}
	for _, cp := range cps {
		if cp.ID == id {
			return cp, true
		}
	}
	return Checkpoint{}, false
}

func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
