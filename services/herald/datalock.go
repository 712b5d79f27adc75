package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// lockFile in the data folder is held (flock) by the one process that owns
// the folder's streams: `herald up`, or `herald run`/`chat` running Herald
// in-process. It holds a JSON line naming the holder, so a second command on
// the folder can attach to it or say who holds it. The kernel drops the
// lock when the holder exits, however it exits.
const lockFile = "herald.lock"

// lockHolder is what the lock file says about its holder.
type lockHolder struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	// NATS is the client URL of the holder's embedded server when it
	// listens (herald up); a second command attaches there.
	NATS      string    `json:"nats,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
	Started   time.Time `json:"started"`
}

// errDataDirBusy is a data folder another process holds.
type errDataDirBusy struct {
	dir    string
	holder lockHolder
}

func (e *errDataDirBusy) Error() string {
	who := fmt.Sprintf("process %d", e.holder.PID)
	if e.holder.Command != "" {
		who += fmt.Sprintf(" (%s)", e.holder.Command)
	}
	return fmt.Sprintf("data folder %s is in use by %s; wait for it to finish, stop it, or give this command another data folder (HERALD_DATA_DIR)", e.dir, who)
}

// dataLock is a held lock on a data folder.
type dataLock struct {
	f      *os.File
	holder lockHolder
}

// lockDataDir takes the data folder dir for this process, or returns an
// *errDataDirBusy naming the process holding it. It never waits.
func lockDataDir(dir string, holder lockHolder) (*dataLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data folder: %w", err)
	}
	ignoreDataDir(dir)
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data folder lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &errDataDirBusy{dir: dir, holder: readHolder(path)}
		}
		return nil, fmt.Errorf("data folder lock %s: %w", path, err)
	}
	holder.PID = os.Getpid()
	holder.Command = commandLine()
	holder.Started = time.Now().UTC()
	l := &dataLock{f: f, holder: holder}
	if err := l.write(); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// setNATS records the URL the holder's server listens on.
func (l *dataLock) setNATS(url string) error {
	l.holder.NATS = url
	return l.write()
}

func (l *dataLock) write() error {
	data, _ := json.Marshal(l.holder)
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("data folder lock: %w", err)
	}
	if _, err := l.f.WriteAt(append(data, '\n'), 0); err != nil {
		return fmt.Errorf("data folder lock: %w", err)
	}
	return nil
}

// release drops the lock (closing the file does); the file stays.
func (l *dataLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// readHolder reads the holder's line, waiting a moment for a holder that
// has just taken the lock and not yet written it.
func readHolder(path string) lockHolder {
	var h lockHolder
	for i := 0; i < 20; i++ {
		if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &h) == nil && h.PID != 0 {
			return h
		}
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

// commandLine is how this process was started, cut to a readable length.
func commandLine() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		if i == 0 {
			a = filepath.Base(a)
		}
		if strings.ContainsAny(a, " \t\"'") || a == "" {
			a = fmt.Sprintf("%q", a)
		}
		args[i] = a
	}
	return shorten(strings.Join(args, " "), 120)
}

// ignoreDataDir gives the data folder its own .gitignore ignoring
// everything, so `git status` in the project never lists .herald/.
func ignoreDataDir(dir string) {
	path := filepath.Join(dir, ".gitignore")
	if _, err := os.Lstat(path); err == nil {
		return
	}
	_ = os.WriteFile(path, []byte("# Herald's data folder (streams, workspace, history): not for version control.\n*\n"), 0o644)
}

// folderHolder is the process holding data folder dir, if any.
func folderHolder(dir string) (lockHolder, bool) {
	path := filepath.Join(dir, lockFile)
	f, err := os.Open(path)
	if err != nil {
		return lockHolder{}, false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil {
		return lockHolder{}, false // nobody holds it
	}
	h := readHolder(path)
	return h, h.PID != 0
}
