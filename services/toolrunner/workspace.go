package toolrunner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/proto"
)

// workspace is one session's folder, held open: every path a tool touches
// is resolved inside it by the one confinement primitive of this package
// (confine.go), never opened by name from the host's root.
type workspace struct {
	// root is the folder's absolute path, every symlink evaluated, as it
	// was when opened: the working folder of the commands tools run, and
	// what messages show. Files are never opened through it.
	root string
	// dir is the folder itself, opened; nil for a workspace only named
	// (the sandbox's use of contains).
	dir *os.Root
	// info is the folder's identity, as opened.
	info fs.FileInfo
	// hidden are folders inside the workspace its tools never enter,
	// known by identity: in the runner's root, the tenants' folder (an
	// unbound task's tools do not reach tenants' workspaces); anywhere, the
	// runner's data folder.
	hidden []fs.FileInfo
	// hiddenTop are names at the workspace's top its tools never reach,
	// whatever is there (the tenants' folder in the runner's root).
	hiddenTop map[string]bool
}

// openWorkspace opens the folder sub under root, creating it if missing.
// Each folder of sub is opened from the one before it and must be a folder,
// not a symlink: a task's workspace is where it says, so a symlink cannot
// take it out of the root, out of its tenant's folder (tenants/<tenant>) or
// into the tenants' folder or the folders in hide (the runner's data).
func openWorkspace(root, sub string, hide ...string) (workspace, error) {
	parts, err := workspaceParts(sub)
	if err != nil {
		return workspace{}, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return workspace{}, fmt.Errorf("create workspace root: %w", err)
	}
	base, err := filepath.Abs(root) // a relative root is compared with absolute paths below
	if err == nil {
		base, err = filepath.EvalSymlinks(base)
	}
	if err != nil {
		return workspace{}, fmt.Errorf("workspace root: %w", err)
	}
	w := workspace{root: base}
	for _, h := range hide {
		if h == "" {
			continue
		}
		if info, err := os.Stat(h); err == nil && info.IsDir() {
			w.hidden = append(w.hidden, info)
		}
	}
	dir, err := os.OpenRoot(base)
	if err != nil {
		return workspace{}, fmt.Errorf("workspace root: %w", err)
	}
	if len(parts) == 0 {
		// The runner's root: an unbound task's tools never reach the
		// tenants' folder, which always exists so that nothing else can
		// take its name.
		if err := dir.Mkdir(bus.TenantsFolder, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			dir.Close()
			return workspace{}, fmt.Errorf("create %s folder: %w", bus.TenantsFolder, err)
		}
		if info, err := dir.Lstat(bus.TenantsFolder); err == nil && info.IsDir() {
			w.hidden = append(w.hidden, info)
		}
		w.hiddenTop = map[string]bool{bus.TenantsFolder: true}
	}
	for _, part := range parts {
		child, err := w.enter(dir, part, true)
		dir.Close()
		if err != nil {
			if errors.Is(err, ErrOutsideWorkspace) {
				return workspace{}, fmt.Errorf("workspace %q: %w", sub, ErrOutsideWorkspace)
			}
			return workspace{}, fmt.Errorf("workspace %q: %w", sub, err)
		}
		dir = child
		w.root = filepath.Join(w.root, part)
	}
	if w.info, err = dir.Stat("."); err != nil {
		dir.Close()
		return workspace{}, fmt.Errorf("workspace %q: %w", sub, err)
	}
	w.dir = dir
	return w, nil
}

// workspaceParts are the folders of a task's workspace under the runner's
// root. A workspace in the tenants' folder is a tenant's: tenants/<tenant>,
// or a folder in it.
func workspaceParts(sub string) ([]string, error) {
	refuse := fmt.Errorf("workspace %q: %w", sub, ErrOutsideWorkspace)
	if strings.HasPrefix(sub, "/") || hasDotDot(sub) {
		return nil, refuse
	}
	var parts []string
	for _, p := range strings.Split(filepath.ToSlash(filepath.Clean("/" + sub))[1:], "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) > 0 && parts[0] == bus.TenantsFolder && (len(parts) < 2 || !proto.IsToken(parts[1])) {
		return nil, refuse
	}
	return parts, nil
}

// enter opens the folder name in dir, creating it when create is set; a
// symlink, a hidden folder or anything but a folder is refused.
func (w workspace) enter(dir *os.Root, name string, create bool) (*os.Root, error) {
	info, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := dir.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		info, err = dir.Lstat(name)
	}
	switch {
	case err != nil:
		return nil, err
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symlink: %w", name, ErrOutsideWorkspace)
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a folder", name)
	case w.isHidden(info):
		return nil, ErrOutsideWorkspace
	}
	return openDir(dir, name, info)
}

// close lets go of the workspace folder.
func (w workspace) close() {
	if w.dir != nil {
		_ = w.dir.Close()
	}
}

func (w workspace) outside(p string) error {
	return fmt.Errorf("%q: %w (%s); use a path relative to the workspace", p, ErrOutsideWorkspace, w.root)
}

// isHidden reports whether the folder info is one the tools never enter.
func (w workspace) isHidden(info fs.FileInfo) bool {
	for _, h := range w.hidden {
		if os.SameFile(h, info) {
			return true
		}
	}
	return false
}

// contains reports whether the absolute path abs names the workspace or
// something in it, by name only (the sandbox's folders).
func (w workspace) contains(abs string) bool {
	rel, err := filepath.Rel(w.root, abs)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
