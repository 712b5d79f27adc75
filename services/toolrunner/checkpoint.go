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
	if err := snapshot(c.ws, dir); err != nil {
		_ = os.RemoveAll(dir)
		s.log.Warn().Err(err).Str("session_id", c.req.GetSessionId()).Str("call_id", c.req.GetCallId()).Msg("workspace checkpoint skipped")
	}
}

func sessionCheckpoints(cfg Config, sid string) string {
	return filepath.Join(cfg.CheckpointDir, bus.Token(sid))
}

// snapshot copies the workspace into dir (written under a temporary name and
// renamed, so a half-written snapshot is never taken for a checkpoint). The
// workspace is read through its folder, as the file tools read it: its
// hidden folders are left out and a symlink is copied as a link, never
// followed.
func snapshot(w workspace, dir string) error {
	if err := checkSize(w); err != nil {
		return err
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	if err := copyOut(w, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, dir)
}

func checkSize(w workspace) error {
	files, bytes := 0, int64(0)
	return w.walk(w.dir, ".", func(_ *os.Root, _, _ string, info fs.FileInfo) error {
		if info.Mode().IsRegular() {
			files, bytes = files+1, bytes+info.Size()
		}
		if files > checkpointMaxFiles || bytes > checkpointMaxBytes {
			return fmt.Errorf("%w (over %d files or %d MB)", errTooBig, checkpointMaxFiles, checkpointMaxBytes>>20)
		}
		return nil
	})
}

// copyOut copies the workspace's regular files, folders and symlinks (as
// links) into dst, a folder of the runner's own, checkpointMaxBytes of
// file content at most, whatever the files do meanwhile.
func copyOut(w workspace, dst string) error {
	room := int64(checkpointMaxBytes)
	return w.walk(w.dir, ".", func(dir *os.Root, name, rel string, info fs.FileInfo) error {
		target := filepath.Join(dst, filepath.FromSlash(rel))
		switch {
		case info.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := dir.Readlink(name)
			if err != nil {
				return nil // changed since it was listed: not this snapshot's
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			e := &entry{dir: dir, name: name, rel: rel, info: info}
			in, err := e.openFile()
			if err != nil {
				return nil // changed since it was listed: not this snapshot's
			}
			defer in.Close()
			return copyTo(in, target, info.Mode().Perm(), &room)
		}
		return nil
	})
}

// copyTo copies in to dst, at most *room bytes, and takes what it copied
// from room: a file that grows after checkSize (a command still writing,
// truncate -s 64G) stops the snapshot at the limit instead of filling the
// runner's disk.
func copyTo(in io.Reader, dst string, mode fs.FileMode, room *int64) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, *room+1))
	*room -= n
	if err == nil && *room < 0 {
		err = fmt.Errorf("%w (a file grew past %d MB while it was copied)", errTooBig, checkpointMaxBytes>>20)
	}
	if err != nil {
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
	ws, err := openWorkspace(cfg.WorkspaceRoot, workspace, cfg.DataDir)
	if err != nil {
		return Checkpoint{}, err
	}
	defer ws.close()
	if err := clearWorkspace(ws); err != nil {
		return Checkpoint{}, fmt.Errorf("rollback: %w", err)
	}
	if err := copyIn(cp.dir, ws); err != nil {
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

// clearWorkspace removes what the workspace holds, but its hidden folders.
func clearWorkspace(w workspace) error {
	f, err := w.dir.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		if w.hiddenTop[name] {
			continue
		}
		if info, err := w.dir.Lstat(name); err == nil && info.IsDir() && w.isHidden(info) {
			continue
		}
		if err := w.dir.RemoveAll(name); err != nil {
			return err
		}
	}
	return nil
}

// copyIn copies the checkpoint src (a folder of the runner's own) into the
// workspace, through its folder as the file tools write.
func copyIn(src string, w workspace) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e, err := w.resolve(rel, true)
		if err != nil {
			return err
		}
		defer e.close()
		if e.exists() || e.dir == nil {
			return fmt.Errorf("%s: %w", rel, fs.ErrExist)
		}
		switch {
		case d.IsDir():
			return e.dir.Mkdir(e.name, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return e.dir.Symlink(link, e.name)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return e.writeMode(data, info.Mode().Perm())
		}
		return nil
	})
}
