package api

import (
	"os"
	"strings"
	"syscall"
)

// crashPoint kills the process, as kill -9 would, at the named point when
// HERALD_TEST_CRASH is "NAME:MARKER" and the file MARKER does not exist yet
// (it is created first, so the restarted process goes past). Only tests set
// it: they prove that work cut at that point is neither lost nor doubled.
func crashPoint(name string) {
	spec := os.Getenv("HERALD_TEST_CRASH")
	point, marker, ok := strings.Cut(spec, ":")
	if !ok || point != name || marker == "" {
		return
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return // crashed here once already
	}
	_ = f.Close()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
