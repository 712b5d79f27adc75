package toolrunner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The one way tools reach workspace files. A path the model names is
// resolved one component at a time, each folder opened with openat from the
// folder before it (os.Root) and checked to be the very folder that was
// looked at, so nothing is opened by name from the host's root, and a folder
// swapped for a symlink while a call runs is refused, never followed. A
// symlink is followed only by reading it and resolving its target the same
// way, from the workspace's top: it may lead anywhere inside the workspace
// but out of it nowhere, nor into a hidden folder. The file itself is
// opened from its folder and checked to be what was looked at, too.

// maxSymlinks bounds the symlinks one path may go through (Linux's own).
const maxSymlinks = 40

// errChanged refuses a path a racing writer changed while it was opened.
var errChanged = errors.New("changed while it was being opened")

// openDir opens the folder name in parent, which Lstat saw as seen; it
// must still be that folder (not a symlink put in its place since).
func openDir(parent *os.Root, name string, seen fs.FileInfo) (*os.Root, error) {
	r, err := parent.OpenRoot(name)
	if err != nil {
		if isEscape(err) {
			return nil, fmt.Errorf("%s %w: %w", name, errChanged, ErrOutsideWorkspace)
		}
		return nil, err
	}
	info, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, err
	}
	if !os.SameFile(info, seen) {
		r.Close()
		return nil, fmt.Errorf("%s %w: %w", name, errChanged, ErrOutsideWorkspace)
	}
	return r, nil
}

// isEscape is os.Root's refusal of a path (or a symlink) leading out of it.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// entry is a path of the workspace, resolved: the folder that holds it,
// opened, and its name there.
type entry struct {
	// dir holds the entry; nil when a folder on the way does not exist.
	dir *os.Root
	// name is the entry's name in dir ("." for dir itself).
	name string
	// rel is its path in the workspace, symlinks resolved (for messages).
	rel string
	// info is what Lstat found there; nil when nothing is there.
	info fs.FileInfo
	own  bool
	// made resolves the path again, making the missing folders on the
	// way; set when dir is nil.
	made func() (*entry, error)
}

// close lets go of the entry's folder (not of the workspace's own).
func (e *entry) close() {
	if e.own && e.dir != nil {
		_ = e.dir.Close()
	}
}

// exists reports whether something is at the entry.
func (e *entry) exists() bool { return e.info != nil }

// resolve finds the path p, relative to the workspace or absolute inside it.
// A path out of the workspace ('..' too far, absolute elsewhere, a symlink
// leading out) or into a hidden folder is refused with ErrOutsideWorkspace.
// With mkdirs, missing folders on the way are made.
func (w workspace) resolve(p string, mkdirs bool) (*entry, error) {
	if strings.TrimSpace(p) == "" {
		return nil, &toolError{status: statusError, msg: "path must not be empty"}
	}
	rel := filepath.Clean(p)
	if filepath.IsAbs(rel) {
		r, err := filepath.Rel(w.root, rel)
		if err != nil {
			return nil, w.outside(p)
		}
		rel = r
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, w.outside(p)
	}
	r := &resolution{w: w, path: p, mkdirs: mkdirs, dir: w.dir}
	e, err := r.run(splitRel(rel))
	if err != nil {
		r.release()
		if errors.Is(err, ErrOutsideWorkspace) {
			return nil, w.outside(p)
		}
		return nil, err
	}
	return e, nil
}

// resolution is one resolve under way: the folder reached so far, held
// open, and its path in the workspace.
type resolution struct {
	w      workspace
	path   string // as the model gave it, for messages
	mkdirs bool
	dir    *os.Root
	own    bool // dir is not the workspace's: release closes it
	at     []string
	links  int
}

// run resolves parts from the folder reached, one name at a time.
func (r *resolution) run(parts []string) (*entry, error) {
	if len(parts) == 0 {
		info, err := r.w.dir.Stat(".")
		return &entry{dir: r.w.dir, name: ".", rel: ".", info: info}, err
	}
	for i := 0; i < len(parts); i++ {
		name, last := parts[i], i == len(parts)-1
		if len(r.at) == 0 && r.w.hiddenTop[name] {
			return nil, ErrOutsideWorkspace
		}
		info, err := r.lstat(name, last)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return r.missing(parts[i:]), nil
		case err != nil:
			return nil, err
		case info.Mode()&fs.ModeSymlink != 0:
			return r.follow(name, parts[i+1:])
		case info.IsDir() && r.w.isHidden(info):
			return nil, ErrOutsideWorkspace
		case last:
			return &entry{dir: r.dir, name: name, rel: r.rel(name), info: info, own: r.own}, nil
		case !info.IsDir():
			return nil, fmt.Errorf("%s: %s is not a folder", r.path, r.rel(name))
		}
		if err := r.enter(name, info); err != nil {
			return nil, err
		}
	}
	return nil, ErrOutsideWorkspace // not reached: the loop returns at the last name
}

// lstat looks at name in the folder reached; a missing folder on the way
// is made when the resolution makes folders.
func (r *resolution) lstat(name string, last bool) (fs.FileInfo, error) {
	info, err := r.dir.Lstat(name)
	if !errors.Is(err, fs.ErrNotExist) || last || !r.mkdirs {
		return info, err
	}
	if err := r.dir.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return r.dir.Lstat(name)
}

// missing is the entry of a path whose rest does not exist: the last name
// in the folder reached, or, when a folder on the way is missing, nowhere
// yet (made makes the folders once a write may go ahead).
func (r *resolution) missing(rest []string) *entry {
	e := &entry{dir: r.dir, name: rest[0], rel: r.rel(rest...), own: r.own}
	if len(rest) > 1 {
		r.release()
		w, p := r.w, r.path
		e.dir, e.own, e.made = nil, false, func() (*entry, error) { return w.resolve(p, true) }
	}
	r.own = false
	return e
}

// enter moves into the folder name, which Lstat saw as info.
func (r *resolution) enter(name string, info fs.FileInfo) error {
	child, err := openDir(r.dir, name, info)
	if err != nil {
		return err
	}
	r.release()
	r.dir, r.own, r.at = child, true, append(r.at, name)
	return nil
}

// follow reads the symlink name and resolves its target, then rest, from
// the workspace's top again.
func (r *resolution) follow(name string, rest []string) (*entry, error) {
	if r.links++; r.links > maxSymlinks {
		return nil, fmt.Errorf("%s: too many symlinks", r.path)
	}
	target, err := r.dir.Readlink(name)
	if err != nil {
		return nil, err
	}
	to, ok := r.w.linkTarget(r.at, target)
	if !ok {
		return nil, ErrOutsideWorkspace
	}
	r.release()
	r.dir, r.own, r.at = r.w.dir, false, nil
	return r.run(slices.Concat(splitRel(to), rest))
}

// release lets go of the folder reached, unless it is the workspace's.
func (r *resolution) release() {
	if r.own {
		_ = r.dir.Close()
		r.own = false
	}
}

// rel is the path in the workspace of names under the folder reached.
func (r *resolution) rel(names ...string) string {
	return path.Join(slices.Concat(r.at, names)...)
}

// linkTarget is where a symlink found in folder at (a path in the
// workspace) leads, as a path in the workspace; false when out of it.
func (w workspace) linkTarget(at []string, target string) (string, bool) {
	var to string
	if filepath.IsAbs(target) {
		r, err := filepath.Rel(w.root, filepath.Clean(target))
		if err != nil {
			return "", false
		}
		to = r
	} else {
		to = filepath.Clean(filepath.Join(append(at, target)...))
	}
	if to == ".." || strings.HasPrefix(to, "../") {
		return "", false
	}
	return to, true
}

func splitRel(rel string) []string {
	var out []string
	for _, p := range strings.Split(filepath.ToSlash(rel), "/") {
		if p != "" && p != "." {
			out = append(out, p)
		}
	}
	return out
}

// openFile opens the regular file at e for reading, checking it is still
// the file Lstat saw (never a FIFO or device put in its place, which could
// block the read).
func (e *entry) openFile() (*os.File, error) {
	f, err := e.dir.OpenFile(e.name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if isEscape(err) {
			return nil, fmt.Errorf("%s %w: %w", e.rel, errChanged, ErrOutsideWorkspace)
		}
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() || !os.SameFile(info, e.info) {
		f.Close()
		return nil, fmt.Errorf("%s %w: %w", e.rel, errChanged, ErrOutsideWorkspace)
	}
	return f, nil
}

// readAll reads the regular file at e, at most max bytes; errTooLarge when
// it holds more.
func (e *entry) readAll(max int64) ([]byte, error) {
	f, err := e.openFile()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, nil
}

var errTooLarge = errors.New("too large")

// write replaces the content of the file at e, whole or not at all: it is
// written beside it under a temporary name and renamed over it, keeping an
// existing file's permissions.
func (e *entry) write(content []byte) error {
	mode := fs.FileMode(0o644)
	if e.info != nil && e.info.Mode().IsRegular() {
		mode = e.info.Mode().Perm()
	}
	return e.writeMode(content, mode)
}

// writeMode is write with the file's permissions given.
func (e *entry) writeMode(content []byte, mode fs.FileMode) error {
	if e.dir == nil {
		return fs.ErrNotExist
	}
	if e.info != nil && e.info.IsDir() {
		return errors.New("it is a directory")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".herald-write-" + hex.EncodeToString(rnd[:])
	// O_EXCL: os.Root never follows a symlink for an exclusive create.
	f, err := e.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, werr := f.Write(content)
	if werr == nil {
		werr = f.Chmod(mode) // the umask may have narrowed it
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = e.dir.Rename(tmp, e.name)
	}
	if werr != nil {
		_ = e.dir.Remove(tmp)
	}
	return werr
}

// walk calls visit for everything under the folder dir (at rel in the
// workspace), by name, a folder before what it holds. It never follows a
// symlink and never enters a hidden folder; every folder is opened from
// its parent and checked as resolve's are (one that changed is skipped).
// visit returns fs.SkipDir to leave a folder out, fs.SkipAll to stop.
func (w workspace) walk(dir *os.Root, rel string, visit func(dir *os.Root, name, rel string, info fs.FileInfo) error) error {
	err := w.walkDir(dir, rel, visit)
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func (w workspace) walkDir(dir *os.Root, rel string, visit func(dir *os.Root, name, rel string, info fs.FileInfo) error) error {
	f, err := dir.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if rel == "." && w.hiddenTop[name] {
			continue
		}
		info, err := dir.Lstat(name)
		if err != nil {
			continue // gone since the folder was read
		}
		if info.IsDir() && w.isHidden(info) {
			continue
		}
		sub := path.Join(rel, name)
		switch err := visit(dir, name, sub, info); {
		case errors.Is(err, fs.SkipDir):
			continue
		case err != nil:
			return err
		}
		if !info.IsDir() {
			continue
		}
		child, err := openDir(dir, name, info)
		if err != nil {
			continue
		}
		err = w.walkDir(child, sub, visit)
		child.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
