//go:build !linux

package popen

import (
	"log/slog"
	"os/exec"
	"syscall"
)

// isolator starts programs in a process group of their own, which an
// abort kills whole; this system has no PID namespaces, so a process that
// leaves the group (setsid) may outlive its transfer.
type isolator struct{}

// startTree starts the command command makes, with cred (nil: the
// server's user), in a process group of its own: never isolated.
func (*isolator) startTree(command func(*syscall.SysProcAttr) *exec.Cmd, cred *syscall.Credential, _ *slog.Logger) (*exec.Cmd, bool, error) {
	cmd := command(&syscall.SysProcAttr{Setpgid: true, Credential: cred})
	return cmd, false, cmd.Start()
}
