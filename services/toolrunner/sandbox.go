package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/heraldrun/herald/pkg/bus"
	"github.com/heraldrun/herald/pkg/config"
	"github.com/rs/zerolog"
)

// ErrNoSandbox says the sandbox cannot run here; the runner refuses to start
// rather than run commands unconfined without being told to.
var ErrNoSandbox = errors.New("the command sandbox (bwrap) cannot start")

// sandboxUID is who a command runs as inside the sandbox when the runner is
// root: not root, so it holds no capability and cannot raise its limits.
const sandboxUID = "1000"

// etcFiles are the only files of /etc a sandboxed command sees: what the C
// library, the shell, TLS and git look up.
var etcFiles = []string{
	"passwd", "group", "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf", "services", "protocols",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives", "mime.types",
	"ssl", "ca-certificates", "ca-certificates.conf", "gitconfig", "inputrc", "bash.bashrc", "profile",
}

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
	sb.limits = newCgroupLimits(cfg, log)
	if sb.root && sb.limits == nil {
		log.Warn().Int("processes", cfg.Processes).Msg("sandbox: running as root with no writable cgroup, so the process limit is not enforced (RLIMIT_NPROC does not bind root)")
	}
	if err := sb.probe(); err != nil {
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
	cmd, release, err := sb.Command(ctx, dir, "exit 0", nil)
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

// Command returns the command that runs script with bash in workspace dir,
// confined, with env as its whole environment. release frees what the call
// held (its cgroup) and kills whatever of it is left; call it after Wait.
func (sb *Sandbox) Command(ctx context.Context, dir, script string, env []string) (*exec.Cmd, func(), error) {
	if !sb.Confined() {
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		return cmd, func() {}, nil
	}
	argv := sb.bwrapArgs(dir)
	argv = append(argv, "--", "bash", "-c", sb.limitPrefix()+script)
	release := func() {}
	if sb.limits != nil {
		join, done, err := sb.limits.open()
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox limits: %w", err)
		}
		argv, release = join(argv), done
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	return cmd, release, nil
}

// bwrapArgs is the mount and namespace set-up of a command in dir.
func (sb *Sandbox) bwrapArgs(dir string) []string {
	a := []string{sb.bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL"}
	if !sb.cfg.Network {
		a = append(a, "--unshare-net")
	}
	if sb.root {
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
		a = append(a, "--ro-bind-try", p, p)
	}
	a = append(a, "--bind", dir, dir)
	for _, h := range sb.hiddenIn(dir) {
		a = append(a, "--tmpfs", h)
	}
	return append(a, "--chdir", dir, "--setenv", "HOME", "/tmp")
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
	if sb != nil && sb.limits != nil {
		sb.limits.close()
	}
}
