package toolrunner

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// usageTTL is how long a measured workspace size is trusted; the file
// tools' own writes are counted as they happen, what commands wrote in
// between is seen at the next measurement.
const usageTTL = 2 * time.Second

// workspaceUsage keeps the measured size of the workspaces this runner
// writes to, by folder identity.
type workspaceUsage struct {
	mu   sync.Mutex
	byWS map[[2]uint64]*usage
}

type usage struct {
	mu       sync.Mutex
	bytes    int64
	measured time.Time
}

// of is the usage record of workspace w.
func (u *workspaceUsage) of(w workspace) *usage {
	key := [2]uint64{0, 0}
	if st, ok := w.info.Sys().(*syscall.Stat_t); ok {
		key = [2]uint64{uint64(st.Dev), st.Ino}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byWS == nil {
		u.byWS = map[[2]uint64]*usage{}
	}
	if len(u.byWS) > 1024 {
		for k, r := range u.byWS {
			if r.mu.TryLock() {
				if time.Since(r.measured) > usageTTL {
					delete(u.byWS, k)
				}
				r.mu.Unlock()
			}
		}
	}
	r := u.byWS[key]
	if r == nil {
		r = &usage{}
		u.byWS[key] = r
	}
	return r
}

// size is what the workspace's files hold (its hidden folders left out).
func (w workspace) size() (int64, error) {
	var total int64
	err := w.walk(w.dir, ".", func(_ *os.Root, _, _ string, info fs.FileInfo) error {
		if info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// checkWriteSize refuses a call that would write more than one call may.
func (s *Service) checkWriteSize(c *call, n int64) error {
	if limit := s.cfg.Files.MaxWriteBytes; n > limit {
		return &toolError{status: statusError, correctable: true, msg: fmt.Sprintf(
			"error: %s refused: the file would be %s, over %s, the most one call may write (files.max_write_bytes); nothing was written. Write it in smaller files, or with terminal.",
			c.spec.Name, sizeText(n), sizeText(limit))}
	}
	return nil
}

// writeEntry writes content to the file at e, whole or not at all, within
// the per-call limit and the workspace's cap.
func (s *Service) writeEntry(c *call, e *entry, content string) error {
	n := int64(len(content))
	if err := s.checkWriteSize(c, n); err != nil {
		return err
	}
	u := s.usage.of(c.ws)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.measured.IsZero() || time.Since(u.measured) > usageTTL {
		size, err := c.ws.size()
		if err != nil {
			return fmt.Errorf("measure the workspace: %w", err)
		}
		u.bytes, u.measured = size, time.Now()
	}
	var old int64
	if e.info != nil && e.info.Mode().IsRegular() {
		old = e.info.Size()
	}
	// A write that does not grow the workspace may go ahead even over the
	// cap (it may be what brings it back under).
	if limit := s.cfg.Files.MaxWorkspaceBytes; n > old && u.bytes-old+n > limit {
		return &toolError{status: statusError, correctable: true, msg: fmt.Sprintf(
			"error: %s refused: the workspace would hold %s, over its cap of %s (files.max_workspace_bytes); nothing was written. Delete files it no longer needs first.",
			c.spec.Name, sizeText(u.bytes-old+n), sizeText(limit))}
	}
	if e.dir == nil && e.made != nil {
		made, err := e.made()
		if err != nil {
			return err
		}
		defer made.close()
		e = made
	}
	if err := e.write([]byte(content)); err != nil {
		return err
	}
	u.bytes += n - old
	return nil
}

// sizeText is n bytes for a reader: exact, with binary units when round.
func sizeText(n int64) string {
	for _, u := range []struct {
		unit string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.unit)
		}
		if n >= u.size {
			return fmt.Sprintf("%d bytes (%.1f %s)", n, float64(n)/float64(u.size), u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
