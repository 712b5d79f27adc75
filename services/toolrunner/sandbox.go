package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/rs/zerolog"
)

// ErrNoSandbox says the sandbox cannot run here; the runner refuses to start
// rather than run commands unconfined without being told to.
var ErrNoSandbox = errors.New("the command sandbox (bwrap) cannot start")

// sandboxUID is who a command is inside the sandbox when the runner is
// root. On the host it is sandbox.uid (nobody unless configured): never
// root, so it holds no capability, cannot raise its limits and reads only
// what any unprivileged user may read.
const sandboxUID = "1000"

// etcFiles are the only paths of /etc a sandboxed command sees: what the C
// library, the shell, TLS (the CA certificates, not /etc/ssl/private), git,
// Python and Node look up. Nothing else of /etc is there: no shadow, no
// private key, no host credentials.
var etcFiles = []string{
	"passwd", "group", "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf", "services", "protocols",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives", "mime.types",
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf", "pki/tls/certs", "pki/ca-trust/extracted",
	"gitconfig", "inputrc", "bash.bashrc", "profile", "os-release", "environment", "python3", "npmrc",
}

// rootWrapper is how a root runner starts bwrap: as root, in a mount
// namespace of its own (the runner makes it), it enters the call's cgroups,
// binds each host path the command is to see beyond the system folders
// (its workspace, the read_only paths) on a mount point of the stage
// folder, then becomes the sandbox user (setpriv) and runs bwrap, which
// binds them from the stage. bwrap then runs unprivileged: its user
// namespace maps the command to that user, not to root, and it resolves
// paths as that user, who may not be allowed to walk to the workspace
// (under /root, in a 0700 folder); the stage it can. The binds are seen in
// that namespace only and vanish with it.
//
// The workspace is bound by its path (mount resolves it), and then the
// folder mounted is checked to be the one the runner holds open and
// verified (its device and inode, the identity argument): a parent folder
// swapped for a symlink in between makes the call fail, never run in the
// folder the symlink leads to. ("-": a read_only path, not checked.)
//
// Arguments: stage uid gid [cgroup.procs...] -- [mount-point source identity]... -- bwrap...
const rootWrapper = `stage=$1 uid=$2 gid=$3; shift 3
while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift
while [ "$1" != -- ]; do mount --rbind "$2" "$stage/$1" || exit 125
[ "$3" = - ] || [ "$(stat -c %d:%i "$stage/$1")" = "$3" ] || { echo "herald: $2 changed while its sandbox was set up; nothing ran" >&2; exit 125; }
shift 3; done; shift
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups --pdeathsig=KILL -- "$@"`

// wrapperProcsAt is where the cgroup.procs files go in the wrapper's argv
// (after bash -c script $0 stage uid gid).
const wrapperProcsAt = 7

// Sandbox turns a command into one that runs under Bubblewrap: it sees only
// the system's program and library folders, a few files of /etc, the
// configured read-only paths, its workspace (read-write) and a private /tmp;
// it has no network unless allowed, its own PID namespace (no host process
// visible, every process ends with the call) and CPU, memory and process
// limits. Every command the runner starts goes through Command.
type Sandbox struct {
	cfg    config.Sandbox
	bwrap  string
	root   bool
	limits *cgroupLimits
	// workspaceRoot and dataDir are the runner's: commands see neither the
	// tenants' folder of the root nor the data folder, wherever they lie.
	workspaceRoot, dataDir string
	// stage is where a root runner's wrapper binds what bwrap binds on (an
	// empty folder on the host; see rootWrapper).
	stage string
	// hand is what handOver remembers of the workspaces it walked.
	hand *handOverState
}

// handOverState are the folders of each workspace handOver last walked.
type handOverState struct {
	mu   sync.Mutex
	seen map[string]map[string]folderSeen
}

// NewSandbox checks that the sandbox of cfg can run here. Mode none is
// allowed only when set explicitly and is logged once as a warning.
func NewSandbox(cfg config.Sandbox, log zerolog.Logger) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sb := &Sandbox{cfg: cfg, root: os.Geteuid() == 0}
	if cfg.Mode == config.SandboxNone {
		log.Warn().Msg("sandbox.mode is none: commands run with the tool runner's own view of the machine (files, network, processes)")
		return sb, nil
	}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("%w: bwrap is not installed (Debian package bubblewrap); install it or set sandbox.mode: none", ErrNoSandbox)
	}
	sb.bwrap = path
	if sb.root {
		for _, tool := range []string{"setpriv", "mount"} {
			if _, err := exec.LookPath(tool); err != nil {
				return nil, fmt.Errorf("%w: %s is not installed (Debian package util-linux); a root runner needs it to run commands as sandbox.uid; install it or set sandbox.mode: none", ErrNoSandbox, tool)
			}
		}
		removeStaleStages()
		stage, err := os.MkdirTemp(stageParent(), fmt.Sprintf("%s%d-", stagePrefix, os.Getpid()))
		if err != nil {
			return nil, fmt.Errorf("sandbox stage: %w", err)
		}
		if err := os.Chmod(stage, 0o755); err != nil {
			_ = os.Remove(stage)
			return nil, fmt.Errorf("sandbox stage: %w", err)
		}
		sb.stage, sb.hand = stage, &handOverState{}
	}
	sb.limits = newCgroupLimits(cfg, log)
	if err := sb.probe(); err != nil {
		sb.close()
		return nil, err
	}
	return sb, nil
}

// probe starts one sandboxed command, so a host where bwrap cannot create
// its namespaces is found at start-up, not at the first call.
func (sb *Sandbox) probe() error {
	dir, err := os.MkdirTemp("", "herald-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("sandbox probe: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("sandbox probe: %w", err)
	}
	defer root.Close()
	cmd, release, err := sb.Command(ctx, workspace{root: dir, dir: root}, "exit 0", nil)
	if err != nil {
		return err
	}
	defer release()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %v: %s; fix it or set sandbox.mode: none", ErrNoSandbox, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Confined reports whether commands run in the sandbox (mode bwrap).
func (sb *Sandbox) Confined() bool { return sb.bwrap != "" }

// Command returns the command that runs script with bash in workspace ws,
// confined, with env as its whole environment; opts add extra files (handed
// on to the command as fd 3, 4...) and environment. The sandbox binds the
// workspace folder ws holds open, not its path: bwrap gets the folder as an
// inherited fd (--bind-fd, which checks that what it mounted is that very
// folder), a root runner's wrapper checks the folder it mounted by device
// and inode. A parent folder swapped for a symlink since ws was opened fails
// the call; it never gives the command another folder. release frees what
// the call held (its cgroup, the fd) and kills whatever of it is left; call
// it after Wait.
func (sb *Sandbox) Command(ctx context.Context, ws workspace, script string, env []string, opts ...func(*exec.Cmd)) (*exec.Cmd, func(), error) {
	if !sb.Confined() {
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = ws.root, env
		for _, o := range opts {
			o(cmd)
		}
		return cmd, func() {}, nil
	}
	held, err := sb.hold(ws)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: workspace %s: %w", ws.root, err)
	}
	sb.handOverRoot(ws.dir, ws.root)
	argv := sb.bwrapArgs(ws.root, held)
	argv = append(argv, "--", "bash", "-c", sb.limitPrefix()+script)
	argv, done, err := sb.limit(argv)
	if err != nil {
		held.close()
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// Nothing is resolved from the workspace's path on the host: bwrap and
	// the wrapper start in /, and the command in the folder bound.
	cmd.Dir, cmd.Env = "/", env
	cmd.SysProcAttr = sb.procAttr()
	for _, o := range opts {
		o(cmd)
	}
	if held.file != nil {
		// The folder's fd comes after the caller's extra files, which keep
		// their numbers (3, 4...); bwrap closes it once it has bound it.
		i := slices.Index(cmd.Args, heldFDArg)
		cmd.Args[i] = strconv.Itoa(3 + len(cmd.ExtraFiles))
		cmd.ExtraFiles = append(cmd.ExtraFiles, held.file)
	}
	return cmd, func() { done(); held.close() }, nil
}

// heldFDArg stands for the workspace folder's fd in bwrap's arguments
// until the command's extra files are known.
const heldFDArg = "{workspace-fd}"

// heldFolder is a command's workspace as the sandbox binds it: the folder
// opened (bwrap's --bind-fd, as fd) or its identity (a root runner's
// wrapper checks the folder it mounted against it).
type heldFolder struct {
	file     *os.File
	identity string // device:inode, as stat -c %d:%i prints it
}

// hold opens the folder ws holds again (from its open folder, not by path)
// for the command to inherit, or takes its identity for a root runner.
func (sb *Sandbox) hold(ws workspace) (*heldFolder, error) {
	if ws.dir == nil {
		return nil, errors.New("not opened")
	}
	if sb.stage != "" {
		info, err := ws.dir.Stat(".")
		if err != nil {
			return nil, err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, errors.New("no device and inode")
		}
		return &heldFolder{identity: fmt.Sprintf("%d:%d", st.Dev, st.Ino)}, nil
	}
	f, err := ws.dir.Open(".")
	if err != nil {
		return nil, err
	}
	return &heldFolder{file: f}, nil
}

func (h *heldFolder) close() {
	if h != nil && h.file != nil {
		_ = h.file.Close()
	}
}

// limit puts a command (the argv of bwrap, or of the root wrapper) in a
// cgroup of its own when there is one. release frees it.
func (sb *Sandbox) limit(argv []string) ([]string, func(), error) {
	if sb.limits == nil {
		return argv, func() {}, nil
	}
	procs, done, err := sb.limits.open()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox limits: %w", err)
	}
	if sb.stage != "" {
		return slices.Insert(argv, wrapperProcsAt, procs...), done, nil
	}
	return joinCgroups(procs, argv), done, nil
}

// procAttr is how the runner starts a command's first process: for a root
// runner in a mount namespace of its own, where the wrapper's stage mounts
// stay (they vanish with it).
func (sb *Sandbox) procAttr() *syscall.SysProcAttr {
	if sb.stage == "" {
		return &syscall.SysProcAttr{}
	}
	return &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
}

// binds collects the host paths a command sees beyond the system folders.
// For a root runner each is bound on the stage by the wrapper first, and
// bwrap binds it from there; otherwise bwrap binds the host path itself.
type binds struct {
	stage string
	pairs []string // mount point (in stage), host path and identity, as the wrapper takes them
}

// source is where bwrap binds host path p from; ok is false when p does
// not exist (then it is left out, as --ro-bind-try would). A root runner's
// stage holds an empty folder (d0, d1...) or file (f0...) per bind, made
// once and mounted on in each command's own namespace only.
func (b *binds) source(p string) (string, bool) {
	return b.checked(p, "-")
}

// checked is source for a folder that must be the one of identity
// (device:inode) once mounted ("-": not checked).
func (b *binds) checked(p, identity string) (string, bool) {
	if b.stage == "" {
		return p, true
	}
	info, err := os.Stat(p)
	if err != nil {
		return "", false
	}
	n := strconv.Itoa(len(b.pairs) / 3)
	point := filepath.Join(b.stage, "f"+n)
	if info.IsDir() {
		point = filepath.Join(b.stage, "d"+n)
		if err := os.Mkdir(point, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", false
		}
	} else if f, err := os.OpenFile(point, os.O_CREATE|os.O_RDONLY, 0o644); err != nil {
		return "", false
	} else {
		_ = f.Close()
	}
	b.pairs = append(b.pairs, filepath.Base(point), p, identity)
	return point, true
}

// wrap is argv (bwrap's) as the runner starts it: for a root runner,
// through the wrapper that binds the sources and drops to sandbox.uid.
func (b *binds) wrap(argv []string, cfg config.Sandbox) []string {
	if b.stage == "" {
		return argv
	}
	uid, gid := cfg.HostIDs()
	out := []string{"bash", "-c", rootWrapper, "herald-sandbox", b.stage, strconv.Itoa(uid), strconv.Itoa(gid), "--"}
	out = append(append(out, b.pairs...), "--")
	return append(out, argv...)
}

// bwrapArgs is the mount and namespace set-up of a command in dir: the
// argv of bwrap up to the command, or, for a root runner, of the wrapper
// that starts bwrap (see rootWrapper). With held, the folder bound on dir
// is that one (see Command); without (an MCP server's folder, the runner's
// own), dir's path is bound.
func (sb *Sandbox) bwrapArgs(dir string, held *heldFolder) []string {
	b := &binds{stage: sb.stage}
	a := []string{sb.bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL"}
	if !sb.cfg.Network {
		a = append(a, "--unshare-net")
	}
	if sb.stage != "" {
		a = append(a, "--uid", sandboxUID, "--gid", sandboxUID)
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	for _, p := range hostSystemDirs() {
		if target, err := os.Readlink(p); err == nil {
			a = append(a, "--symlink", target, p)
		} else {
			a = append(a, "--ro-bind", p, p)
		}
	}
	for _, f := range etcFiles {
		a = append(a, "--ro-bind-try", "/etc/"+f, "/etc/"+f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, p := range sb.cfg.ReadOnly {
		if src, ok := b.source(p); ok {
			a = append(a, "--ro-bind-try", src, p)
		}
	}
	switch {
	case held == nil:
		src, _ := b.source(dir)
		a = append(a, "--bind", src, dir)
	case held.file != nil:
		a = append(a, "--bind-fd", heldFDArg, dir)
	default:
		src, _ := b.checked(dir, held.identity)
		a = append(a, "--bind", src, dir)
	}
	for _, h := range sb.hiddenIn(dir) {
		a = append(a, "--tmpfs", h)
	}
	a = append(a, "--chdir", dir, "--setenv", "HOME", "/tmp")
	// The wrapper's arguments come first; the caller appends the command.
	return b.wrap(a, sb.cfg)
}

// handOver gives the sandbox user (sandbox.uid) what root owns in
// workspace dir (what the file tools and checkpoints wrote there as root),
// so a command running as that user can change its workspace; a root
// runner only. It goes through an os.Root of dir and changes owners with
// lchown: a symlink a command planted is changed itself, never followed
// out of the workspace. The folders commands do not see (tenants' folder,
// data folder) are left alone.
//
// A new file, or a file renamed into place, changes its folder's ctime;
// a folder whose ctime and inode are those of the last walk (and old
// enough that a change within the clock's granularity cannot hide) holds
// the same entries, and is not listed again: the walk of a large, settled
// workspace is one lstat per folder.
func (sb *Sandbox) handOver(dir string) {
	if sb.stage == "" {
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	sb.handOverRoot(root, dir)
}

// handOverRoot is handOver of the workspace folder root, held open (dir is
// its path, for the hidden folders and what is remembered).
func (sb *Sandbox) handOverRoot(root *os.Root, dir string) {
	if sb.stage == "" {
		return
	}
	w := handOverWalk{root: root, skip: map[string]bool{}, fresh: map[string]folderSeen{}, now: handOverNow()}
	w.uid, w.gid = sb.cfg.HostIDs()
	for _, h := range sb.hiddenIn(dir) {
		if rel, err := filepath.Rel(dir, h); err == nil {
			w.skip[rel] = true
		}
	}
	if sb.hand == nil {
		w.folder(".")
		return
	}
	sb.hand.mu.Lock()
	defer sb.hand.mu.Unlock()
	w.seen = sb.hand.seen[dir]
	w.folder(".")
	if sb.hand.seen == nil || len(sb.hand.seen) >= maxHandOverWorkspaces {
		sb.hand.seen = map[string]map[string]folderSeen{}
	}
	sb.hand.seen[dir] = w.fresh
}

// handOverNow is the clock handOver judges ctimes by (tests move it).
var handOverNow = time.Now

// maxHandOverWorkspaces bounds the workspaces whose folders handOver
// remembers (past it, it forgets them all and walks each once again).
const maxHandOverWorkspaces = 256

// folderSeen is a folder as handOver last saw it.
type folderSeen struct {
	ctime   syscall.Timespec
	ino     uint64
	subdirs []string
}

type handOverWalk struct {
	root        *os.Root
	uid, gid    int
	skip        map[string]bool
	seen, fresh map[string]folderSeen
	now         time.Time
}

// settle is how old a folder's ctime must be to be trusted unchanged:
// ctime ticks with the kernel's coarse clock.
const settle = 2 * time.Second

// stat is p's owner, ctime and inode, after handing it over if root owns it.
func (w *handOverWalk) stat(p string) (*syscall.Stat_t, bool) {
	info, err := w.root.Lstat(p)
	if err != nil {
		return nil, false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, false
	}
	if st.Uid == 0 {
		_ = w.root.Lchown(p, w.uid, w.gid)
		if info, err = w.root.Lstat(p); err != nil {
			return nil, false
		}
		st, ok = info.Sys().(*syscall.Stat_t)
	}
	return st, ok
}

func (w *handOverWalk) folder(p string) {
	st, ok := w.stat(p)
	if !ok || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return
	}
	settled := w.now.Sub(time.Unix(st.Ctim.Sec, st.Ctim.Nsec)) > settle
	if prev, ok := w.seen[p]; ok && settled && prev.ctime == st.Ctim && prev.ino == st.Ino {
		w.fresh[p] = prev
		for _, sub := range prev.subdirs {
			w.folder(sub)
		}
		return
	}
	f, err := w.root.Open(p)
	if err != nil {
		return
	}
	entries, _ := f.ReadDir(-1)
	_ = f.Close()
	var subdirs []string
	for _, e := range entries {
		child := path.Join(p, e.Name())
		if w.skip[child] {
			continue
		}
		if e.IsDir() {
			subdirs = append(subdirs, child)
			w.folder(child)
		} else {
			w.stat(child)
		}
	}
	if settled {
		w.fresh[p] = folderSeen{ctime: st.Ctim, ino: st.Ino, subdirs: subdirs}
	}
}

// hiddenIn are the folders inside workspace dir a command must not see: an
// untenanted task's workspace may be the runner's root, whose tenants'
// folder stays out of sight; and `herald run` keeps its data folder (the
// NATS store) inside the workspace it runs in.
func (sb *Sandbox) hiddenIn(dir string) []string {
	var out []string
	if root, err := filepath.EvalSymlinks(sb.workspaceRoot); err == nil && root == dir {
		if t := filepath.Join(dir, bus.TenantsFolder); isDir(t) {
			out = append(out, t)
		}
	}
	if sb.dataDir == "" {
		return out
	}
	if abs, err := filepath.Abs(sb.dataDir); err == nil {
		if data, err := filepath.EvalSymlinks(abs); err == nil && data != dir && (workspace{root: dir}).contains(data) && isDir(data) {
			out = append(out, data)
		}
	}
	return out
}

// hostSystemDirs are /bin, /sbin and /lib* of this host (folders or symlinks).
func hostSystemDirs() []string {
	out := []string{}
	for _, p := range []string{"/bin", "/sbin"} {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	libs, _ := filepath.Glob("/lib*")
	return append(out, libs...)
}

// limitPrefix sets the per-process limits before the command runs. Hard
// limits: the command cannot raise them again. With a memory cgroup the
// call's memory is capped there; else each process's data segment is.
func (sb *Sandbox) limitPrefix() string {
	opts := fmt.Sprintf("-t %d -u %d", sb.cfg.CPUSeconds, sb.cfg.Processes)
	if sb.limits == nil || !sb.limits.memory {
		opts += fmt.Sprintf(" -d %d", sb.cfg.MemoryMB*1024)
	}
	return "ulimit -H -S " + opts + " || exit 125\n"
}

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// Close releases what a sandbox made with NewSandbox holds.
func (sb *Sandbox) Close() { sb.close() }

// close releases what the sandbox holds for the runner's lifetime.
func (sb *Sandbox) close() {
	if sb == nil {
		return
	}
	if sb.limits != nil {
		sb.limits.close()
	}
	if sb.stage != "" {
		removeStage(sb.stage)
	}
}

// stagePrefix names the stage folders in the temporary folder, followed by
// the runner's pid.
const stagePrefix = "herald-sandbox-stage-"

// stageParent is where stages are made: the temporary folder when the
// sandbox user can reach it, else the first of /tmp, /var/tmp and /run it
// can. bwrap runs as that user and looks its sources up on the stage, so
// every folder above it must let others through (a TMPDIR inside a 0700
// folder, such as a test's, does not).
func stageParent() string {
	for _, dir := range []string{os.TempDir(), "/tmp", "/var/tmp", "/run"} {
		if othersCanReach(dir) {
			return dir
		}
	}
	return os.TempDir()
}

// othersCanReach says whether every folder of dir, symlinks resolved, lets
// users other than its owner through.
func othersCanReach(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// removeStage removes a stage: mount points only, empty on the host (the
// binds live in each command's own namespace), removed one by one, never
// recursively.
func removeStage(stage string) {
	entries, _ := os.ReadDir(stage)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(stage, e.Name()))
	}
	_ = os.Remove(stage)
}

// removeStaleStages removes the stages of runners that died (or of
// services made and never started).
func removeStaleStages() {
	stages, _ := filepath.Glob(filepath.Join(stageParent(), stagePrefix+"*"))
	for _, d := range stages {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), stagePrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) != nil {
			removeStage(d)
		}
	}
}
