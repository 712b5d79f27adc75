package toolrunner

import (
	"errors"

	"fmt"
	"github.com/heraldrun/herald/pkg/bus"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// workspace is one session's folder; every path a tool touches resolves
// inside it.
type workspace struct {
	// root is absolute with every symlink evaluated, so containment checks
	// compare real locations.
	root string
	// hidden are folders inside the workspace its tools do not reach: in
	// the runner's root, the tenants' folder (an unbound task's tools do not
	// reach tenants' workspaces); anywhere, the runner's data folder.
	hidden []string
}

// openWorkspace returns the folder sub under root, creating it if missing.
func openWorkspace(root, sub string) (workspace, error) {
	if strings.HasPrefix(sub, "/") || hasDotDot(sub) {
		return workspace{}, fmt.Errorf("workspace %q: %w", sub, ErrOutsideWorkspace)
	}
	abs, err := filepath.Abs(filepath.Join(root, sub))
	if err != nil {
		return workspace{}, fmt.Errorf("workspace: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return workspace{}, fmt.Errorf("create workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return workspace{}, fmt.Errorf("workspace: %w", err)
	}
	base, err := filepath.Abs(root) // a relative root is compared with absolute paths below
	if err == nil {
		base, err = filepath.EvalSymlinks(base)
	}
	if err != nil {
		return workspace{}, fmt.Errorf("workspace root: %w", err)
	}
	// A task's folder that is a symlink out of the root is no workspace.
	if !(workspace{root: base}).contains(real) {
		return workspace{}, fmt.Errorf("workspace %q: %w", sub, ErrOutsideWorkspace)
	}
	w := workspace{root: real}
	if real == base {
		w.hidden = []string{filepath.Join(base, bus.TenantsFolder)}
	}
	return w, nil
}

// hiding is w with the folders of paths that lie inside it hidden too.
func (w workspace) hiding(paths ...string) workspace {
	out := w
	out.hidden = append([]string(nil), w.hidden...)
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if real, err := realPath(abs); err == nil && real != w.root && w.contains(real) {
			out.hidden = append(out.hidden, real)
		}
	}
	return out
}

// resolve turns a path given by the model into an absolute path inside the
// workspace. It refuses '..' escapes, absolute paths elsewhere and symlinks
// (anywhere along the path) that lead out.
func (w workspace) resolve(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", &toolError{status: statusError, msg: "path must not be empty"}
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(w.root, p)
	}
	abs = filepath.Clean(abs)
	if !w.contains(abs) {
		return "", w.outside(p)
	}
	real, err := realPath(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	if !w.contains(real) || w.isHidden(real) {
		return "", w.outside(p)
	}
	return real, nil
}

func (w workspace) outside(p string) error {
	return fmt.Errorf("%q: %w (%s); use a path relative to the workspace", p, ErrOutsideWorkspace, w.root)
}

func (w workspace) isHidden(abs string) bool {
	for _, h := range w.hidden {
		if (workspace{root: h}).contains(abs) {
			return true
		}
	}
	return false
}

func (w workspace) contains(abs string) bool {
	rel, err := filepath.Rel(w.root, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// rel is abs relative to the root, for messages the model reads.
func (w workspace) rel(abs string) string {
	if r, err := filepath.Rel(w.root, abs); err == nil {
		return r
	}
	return abs
}

// realPath evaluates the symlinks of the deepest existing ancestor of abs
// and appends the part that does not exist yet.
func realPath(abs string) (string, error) {
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(real, rest), nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
