package accounting

import "syscall"

// serverProcAttr puts the server in its own process group and has the
// kernel stop it if Herald dies without calling Stop.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
