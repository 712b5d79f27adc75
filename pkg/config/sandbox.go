package config

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Sandbox modes (sandbox.mode).
const (
	SandboxBwrap = "bwrap"
	SandboxNone  = "none"
)

// Sandbox is how the tool runner confines the commands it runs (terminal,
// execute_code, anything started as a command): Bubblewrap with an
// allow-list of mounts, no network, its own PID namespace and limits.
type Sandbox struct {
	// Mode is bwrap (the default) or none; none must be set explicitly.
	Mode string `yaml:"mode"`
	// Network lets commands reach the network (off by default).
	Network bool `yaml:"network"`
	// CPUSeconds caps each process's CPU time.
	CPUSeconds int `yaml:"cpu_seconds"`
	// MemoryMB caps the memory of one call's processes.
	MemoryMB int `yaml:"memory_mb"`
	// Processes caps how many processes one call may have at once.
	Processes int `yaml:"processes"`
	// ReadOnly are extra host paths a command may read.
	ReadOnly []string `yaml:"read_only"`
	// Pools override these settings for the runners of one pool.
	Pools map[string]SandboxOverride `yaml:"pools"`
	// UID and GID are the host user and group a command runs as when the
	// runner is root (0: DefaultSandboxID, nobody); never root itself.
	UID int `yaml:"uid"`
	GID int `yaml:"gid"`
}

// DefaultSandboxID is the host uid and gid of a root runner's commands
// unless sandbox.uid and sandbox.gid say otherwise: nobody and nogroup.
const DefaultSandboxID = 65534

// HostIDs are the host uid and gid a root runner's commands run as.
func (s Sandbox) HostIDs() (uid, gid int) {
	uid, gid = s.UID, s.GID
	if uid == 0 {
		uid = DefaultSandboxID
	}
	if gid == 0 {
		gid = DefaultSandboxID
	}
	return uid, gid
}

// SandboxOverride is a pool's difference from the sandbox settings; unset
// fields keep the general value.
type SandboxOverride struct {
	Mode       string   `yaml:"mode"`
	Network    *bool    `yaml:"network"`
	CPUSeconds int      `yaml:"cpu_seconds"`
	MemoryMB   int      `yaml:"memory_mb"`
	Processes  int      `yaml:"processes"`
	ReadOnly   []string `yaml:"read_only"`
}

// DefaultSandbox is the sandbox of issue 15: bwrap, no network, 300 CPU
// seconds, 2 GB, 256 processes.
func DefaultSandbox() Sandbox {
	return Sandbox{Mode: SandboxBwrap, CPUSeconds: 300, MemoryMB: 2048, Processes: 256}
}

// ForPool is the sandbox of the runners of pool.
func (s Sandbox) ForPool(pool string) Sandbox {
	o, ok := s.Pools[pool]
	out := s
	out.Pools = nil
	if !ok {
		return out
	}
	if o.Mode != "" {
		out.Mode = o.Mode
	}
	if o.Network != nil {
		out.Network = *o.Network
	}
	pick := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	pick(&out.CPUSeconds, o.CPUSeconds)
	pick(&out.MemoryMB, o.MemoryMB)
	pick(&out.Processes, o.Processes)
	out.ReadOnly = append(append([]string(nil), s.ReadOnly...), o.ReadOnly...)
	return out
}

// Validate fails fast on a sandbox that cannot be built.
func (s Sandbox) Validate() error {
	var errs []error
	check := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	check(s.Mode == SandboxBwrap || s.Mode == SandboxNone, "sandbox.mode must be bwrap or none, got %q", s.Mode)
	check(s.CPUSeconds > 0 && s.MemoryMB > 0 && s.Processes > 0, "sandbox: cpu_seconds, memory_mb and processes must be positive")
	check(s.UID >= 0 && s.GID >= 0, "sandbox: uid and gid must not be negative (0 or unset means %d, nobody)", DefaultSandboxID)
	for _, p := range s.ReadOnly {
		check(filepath.IsAbs(p), "sandbox.read_only: %q must be an absolute path", p)
	}
	for pool, o := range s.Pools {
		check(o.Mode == "" || o.Mode == SandboxBwrap || o.Mode == SandboxNone, "sandbox.pools.%s.mode must be bwrap or none, got %q", pool, o.Mode)
		check(o.CPUSeconds >= 0 && o.MemoryMB >= 0 && o.Processes >= 0, "sandbox.pools.%s: limits must not be negative", pool)
		for _, p := range o.ReadOnly {
			check(filepath.IsAbs(p), "sandbox.pools.%s.read_only: %q must be an absolute path", pool, p)
		}
	}
	return errors.Join(errs...)
}
