//go:build !linux

package popen

import "syscall"

// sysProcAttr puts a program in a process group of its own, which Abort
// kills whole.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
