//go:build !linux

package accounting

import "syscall"

func serverProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
