package popen

import "syscall"

// sysProcAttr puts a program in a process group of its own, which Abort
// kills whole, and kills it if the server dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
