package toolrunner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/rs/zerolog"
)

// cgroupLimits caps each call's processes (and memory) with a cgroup of its
// own. RLIMIT_NPROC counts per real uid and does not bind root, so a runner
// running as root needs a cgroup for the process limit to be real; as any
// user it also bounds the memory of the call as a whole, not per process.
type cgroupLimits struct {
	// dirs are the parent cgroups (one for cgroup v2, pids and memory
	// hierarchies for v1) under which each call gets its own.
	dirs   []string
	v2     bool
	memory bool
	cfg    config.Sandbox
	seq    atomic.Int64
}

const (
	cgroupFS     = "/sys/fs/cgroup"
	cgroupPrefix = "herald-sandbox-"
)

// cgroupSeq tells apart the cgroups of several runners in one process.
var cgroupSeq atomic.Int64

// removeStaleCgroups removes the cgroups left by runners that died.
func removeStaleCgroups() {
	for _, parent := range []string{cgroupFS, filepath.Join(cgroupFS, "pids"), filepath.Join(cgroupFS, "memory")} {
		dirs, _ := filepath.Glob(filepath.Join(parent, cgroupPrefix+"*"))
		for _, d := range dirs {
			pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), cgroupPrefix), "-")
			if n, err := strconv.Atoi(pid); err != nil || syscall.Kill(n, 0) == nil {
				continue
			}
			leaves, _ := filepath.Glob(filepath.Join(d, "c[0-9]*"))
			for _, leaf := range leaves {
				killCgroup(leaf)
			}
			_ = os.Remove(d)
		}
	}
}

// newCgroupLimits finds a cgroup hierarchy this process may create groups
// in; nil when there is none (then the rlimits inside the sandbox are all
// there is).
func newCgroupLimits(cfg config.Sandbox, log zerolog.Logger) *cgroupLimits {
	removeStaleCgroups()
	name := fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgroupSeq.Add(1))
	if l := cgroupV2(name, cfg); l != nil {
		return l
	}
	if l := cgroupV1(name, cfg); l != nil {
		return l
	}
	log.Debug().Msg("sandbox: no writable cgroup; limits are per-process rlimits only")
	return nil
}

func cgroupV2(name string, cfg config.Sandbox) *cgroupLimits {
	base := cgroupFS
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err != nil {
		return nil
	}
	dir := filepath.Join(base, name)
	if os.Mkdir(dir, 0o755) != nil {
		return nil
	}
	// Children of dir get the controllers only when dir passes them on.
	if writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+pids +memory") != nil &&
		writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+pids") != nil {
		_ = os.Remove(dir)
		return nil
	}
	enabled, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	return &cgroupLimits{dirs: []string{dir}, v2: true, memory: strings.Contains(string(enabled), "memory"), cfg: cfg}
}

func cgroupV1(name string, cfg config.Sandbox) *cgroupLimits {
	pids := filepath.Join(cgroupFS, "pids", name)
	if os.Mkdir(pids, 0o755) != nil {
		return nil
	}
	l := &cgroupLimits{dirs: []string{pids}, cfg: cfg}
	mem := filepath.Join(cgroupFS, "memory", name)
	if os.Mkdir(mem, 0o755) == nil {
		l.dirs, l.memory = append(l.dirs, mem), true
	}
	return l
}

// open makes the cgroup of one call: procs are its cgroup.procs files,
// which the first process of the command writes itself into before it
// starts anything (see joinCgroups), so every process it forks is counted;
// done kills what is left in it and removes it.
func (l *cgroupLimits) open() (procs []string, done func(), err error) {
	leaf := "c" + strconv.FormatInt(l.seq.Add(1), 10)
	var made []string
	undo := func() {
		for _, d := range made {
			killCgroup(d)
		}
	}
	for _, parent := range l.dirs {
		d := filepath.Join(parent, leaf)
		if err := os.Mkdir(d, 0o755); err != nil {
			undo()
			return nil, nil, err
		}
		made = append(made, d)
		if err := l.limit(d); err != nil {
			undo()
			return nil, nil, err
		}
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, undo, nil
}

// joinCgroups rewrites a command's argv so that it enters the cgroups of
// procs before it starts: a shell moves itself into them, then becomes the
// command.
func joinCgroups(procs, argv []string) []string {
	script := `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`
	out := append([]string{"/bin/sh", "-c", script, "herald-sandbox"}, procs...)
	return append(append(out, "--"), argv...)
}

func (l *cgroupLimits) limit(d string) error {
	bytes := strconv.FormatInt(int64(l.cfg.MemoryMB)<<20, 10)
	switch {
	case l.v2:
		if err := writeFile(filepath.Join(d, "pids.max"), strconv.Itoa(l.cfg.Processes)); err != nil {
			return err
		}
		if l.memory {
			_ = writeFile(filepath.Join(d, "memory.swap.max"), "0")
			return writeFile(filepath.Join(d, "memory.max"), bytes)
		}
	case strings.Contains(d, "/pids/"):
		return writeFile(filepath.Join(d, "pids.max"), strconv.Itoa(l.cfg.Processes))
	default:
		return writeFile(filepath.Join(d, "memory.limit_in_bytes"), bytes)
	}
	return nil
}

// killCgroup kills every process left in d and removes it; removal waits
// briefly for the killed processes to be reaped.
func killCgroup(d string) {
	deadline := time.Now().Add(2 * time.Second)
	pause := 100 * time.Microsecond
	for {
		for _, pid := range cgroupPIDs(d) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err := os.Remove(d)
		if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

func cgroupPIDs(d string) []int {
	f, err := os.Open(filepath.Join(d, "cgroup.procs"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// close removes the parent cgroups (when the runner stops).
func (l *cgroupLimits) close() {
	for _, d := range l.dirs {
		_ = os.Remove(d)
	}
}

func writeFile(path, s string) error {
	return os.WriteFile(path, []byte(s), 0o644)
}
